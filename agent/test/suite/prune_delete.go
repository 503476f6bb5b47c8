package suite

import (
	"context"
	"encoding/json"
	"slices"
	"strings"
	"testing"
	"time"

	"cairn.dev/agent/contract"
	"cairn.dev/agent/internal/catalog"
	"cairn.dev/agent/internal/naming"
)

// PruneKeepsNewest ages every backup beyond the retention period: prune
// deletes all but the newest, which still restores.
func PruneKeepsNewest(t *testing.T, e *Env, kind string) {
	st := e.NewStore(t, kind)
	db := "prune_" + kind
	job := naming.Job{Namespace: "shop", Name: "prune-" + kind}
	check(t, e.DB.Seed(db))
	t.Cleanup(func() { e.DB.Drop(db) })
	var results []*contract.Result
	for i := 0; i < 3; i++ {
		results = append(results, mustSucceed(t, e.agent(t, st, db, job, nil, "backup")))
		check(t, e.DB.Mutate(db))
	}
	// The state at the newest backup is the state before the last Mutate:
	// restore it later and compare with a fresh fingerprint of that state.
	ageBackups(t, st, job, 30*24*time.Hour)

	r := e.agent(t, st, db, job, []string{"CAIRN_RETENTION_DAYS=7"}, "prune")
	if r.Code != 0 {
		t.Fatalf("prune failed: %s", r.Stderr)
	}
	var sum contract.Summary
	check(t, json.Unmarshal([]byte(r.TermLog), &sum))
	if sum.Count != 1 || sum.Deleted != 2 {
		t.Fatalf("prune summary %+v, want 1 kept and 2 deleted", sum)
	}
	c := st.Index(t, job)
	if len(c.Entries) != 1 {
		t.Fatalf("catalog has %d entries after prune, want 1", len(c.Entries))
	}
	newest := c.Entries[0]
	if newest.Checksum != results[2].Checksum {
		t.Fatalf("prune kept %s (%s), want the newest backup (%s)", newest.Name, newest.Checksum, results[2].Checksum)
	}
	keys := st.Keys(t, job)
	slices.Sort(keys)
	want := []string{job.Key(newest.Name), job.ManifestKey(newest.Name)}
	slices.Sort(want)
	if !slices.Equal(keys, want) {
		t.Fatalf("store holds %v after prune, want %v", keys, want)
	}
	// Pruning again deletes nothing: the newest survives forever.
	r = e.agent(t, st, db, job, []string{"CAIRN_RETENTION_DAYS=1"}, "prune")
	var again contract.Summary
	check(t, json.Unmarshal([]byte(r.TermLog), &again))
	if r.Code != 0 || again.Count != 1 || again.Deleted != 0 {
		t.Fatalf("second prune: exit %d, %+v", r.Code, again)
	}
	check(t, e.DB.Drop(db))
	mustSucceed(t, e.agent(t, st, db, job, nil, "restore"))
	if fp := fingerprint(t, e.DB, db); !strings.Contains(fp, "customers") {
		t.Fatalf("restore of the kept backup is empty: %s", fp)
	}
}

// ageBackups moves every backup of job back in time by d, as if it had
// been taken then: new names, same bytes, manifests rewritten.
func ageBackups(t *testing.T, st *Store, job naming.Job, d time.Duration) {
	t.Helper()
	ctx := context.Background()
	for _, e := range st.Index(t, job).Entries {
		data := st.Read(t, job.Key(e.Name))
		e.Start, e.End = e.Start.Add(-d), e.End.Add(-d)
		old := e.Name
		var err error
		e.Name, err = naming.ArtifactNameToken(job, e.Engine, e.Start, naming.NewToken())
		check(t, err)
		st.Write(t, job.Key(e.Name), data)
		m, err := catalog.EncodeManifest(job, e)
		check(t, err)
		st.Write(t, job.ManifestKey(e.Name), m)
		check(t, st.Open.Delete(ctx, job.ManifestKey(old)))
		check(t, st.Open.Delete(ctx, job.Key(old)))
	}
}

// DeleteJob deletes every artifact of one job and leaves other jobs alone.
func DeleteJob(t *testing.T, e *Env, kind string) {
	st := e.NewStore(t, kind)
	db := "delete_" + kind
	check(t, e.DB.Seed(db))
	t.Cleanup(func() { e.DB.Drop(db) })
	doomed := naming.Job{Namespace: "shop", Name: "doomed"}
	kept := naming.Job{Namespace: "shop", Name: "doomed-not"} // shares a name prefix
	for i := 0; i < 2; i++ {
		mustSucceed(t, e.agent(t, st, db, doomed, nil, "backup"))
	}
	keptRes := mustSucceed(t, e.agent(t, st, db, kept, nil, "backup"))
	r := e.agent(t, st, db, doomed, nil, "delete")
	if r.Code != 0 {
		t.Fatalf("delete failed: %s", r.Stderr)
	}
	var sum contract.Summary
	check(t, json.Unmarshal([]byte(r.TermLog), &sum))
	if sum.Deleted != 2 || sum.Count != 0 {
		t.Errorf("delete summary %+v, want 2 deleted", sum)
	}
	if keys := st.Keys(t, doomed); len(keys) != 0 {
		t.Fatalf("objects left after delete: %v", keys)
	}
	lr := e.agent(t, st, db, doomed, nil, "list")
	if lr.Code != 0 || strings.TrimSpace(lr.Stdout) != "" {
		t.Fatalf("list after delete: exit %d %q", lr.Code, lr.Stdout)
	}
	lr = e.agent(t, st, db, kept, nil, "list")
	if lr.Code != 0 || !strings.Contains(lr.Stdout, keptRes.Artifact) {
		t.Fatalf("delete touched another job: exit %d %q", lr.Code, lr.Stdout)
	}
	// Deleting again is fine (a finalizer may retry).
	if r := e.agent(t, st, db, doomed, nil, "delete"); r.Code != 0 {
		t.Fatalf("second delete failed: %s", r.Stderr)
	}
}
