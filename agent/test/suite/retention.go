package suite

import (
	"encoding/json"
	"slices"
	"strings"
	"testing"
	"time"

	"cairn.dev/agent/contract"
	"cairn.dev/agent/internal/catalog"
	"cairn.dev/agent/internal/naming"
)

// plantAt stores copies of a successful backup as if taken at each instant,
// listed the way the agent lists them, and returns their names.
func plantAt(t *testing.T, st *Store, job naming.Job, from *contract.Result, at []time.Time) []string {
	t.Helper()
	data := st.Read(t, st.KeyOf(t, job, from.Artifact))
	var out []string
	for _, x := range at {
		e := catalog.Entry{Size: from.Size, Checksum: from.Checksum, Engine: from.Engine,
			Start: x.UTC().Truncate(time.Millisecond), Format: "planted", Compression: "zstd"}
		e.End = e.Start.Add(time.Second)
		var err error
		e.Name, err = naming.ArtifactNameToken(job, e.Engine, e.Start, naming.NewToken())
		check(t, err)
		st.Write(t, job.Key(e.Name), data)
		m, err := catalog.EncodeManifest(job, e)
		check(t, err)
		st.Write(t, job.ManifestKey(e.Name), m)
		out = append(out, e.Name)
	}
	return out
}

// RetentionTiers: 40 nightly backups at 01:30 Asia/Shanghai before today's
// real one; a verification restore (checks passed) of the one 35 days old
// records it in the store; a dry-run prune with keepDaily 7 and minVerified
// 1 reports what it keeps and why and deletes nothing; the prune then
// leaves exactly today's, the 6 previous Shanghai days' and the verified
// one, which still restores; a backup afterwards reports its prune.
func RetentionTiers(t *testing.T, e *Env, kind string) {
	st := e.NewStore(t, kind)
	db := "ret_" + kind
	job := naming.Job{Namespace: "shop", Name: "tiers-" + kind}
	check(t, e.DB.Seed(db))
	t.Cleanup(func() { e.DB.Drop(db); e.DB.Drop(db + "_verify") })
	res := mustSucceed(t, e.agent(t, st, db, job, nil, "backup"))
	sh, err := time.LoadLocation("Asia/Shanghai")
	check(t, err)
	today := res.Start.In(sh)
	var at []time.Time
	for d := 1; d <= 40; d++ {
		day := today.AddDate(0, 0, -d)
		at = append(at, time.Date(day.Year(), day.Month(), day.Day(), 1, 30, 0, 0, sh))
	}
	planted := plantAt(t, st, job, res, at) // planted[i] is i+1 days ago

	verified := planted[34]
	vr := mustSucceed(t, e.agent(t, st, db+"_verify", job, []string{
		contract.EnvArtifact + "=" + verified, contract.EnvRecordVerification + "=true",
		contract.EnvChecks + `=[{"name":"rows","sql":"select count(*) from customers","atLeast":1}]`}, "restore"))
	if !vr.Verified {
		t.Fatalf("restore with passing checks did not record the verification: %+v", vr)
	}
	if _, err := st.TryRead(job.VerifiedKey(verified)); err != nil {
		t.Fatalf("no verification record in the store: %v", err)
	}
	// A restore whose check fails records nothing.
	failed := mustSucceed(t, e.agent(t, st, db+"_verify", job, []string{
		contract.EnvArtifact + "=" + planted[20], contract.EnvRecordVerification + "=true",
		contract.EnvChecks + `=[{"name":"none","sql":"select count(*) from customers","atMost":0}]`}, "restore"))
	if failed.Verified {
		t.Fatal("a restore whose check failed was recorded as verified")
	}
	if _, err := st.TryRead(job.VerifiedKey(planted[20])); err == nil {
		t.Fatal("a restore whose check failed left a verification record")
	}

	policy := []string{contract.EnvRetention + `={"keepDaily":7,"minVerified":1}`, contract.EnvTimeZone + "=Asia/Shanghai"}
	want := append([]string{path0(res.Artifact)}, planted[:6]...)
	want = append(want, verified)
	keysBefore := st.Keys(t, job)
	dry := e.agent(t, st, db, job, append(slices.Clone(policy), contract.EnvPruneDryRun+"=true"), "prune")
	if dry.Code != 0 {
		t.Fatalf("dry run failed: %s", dry.Stderr)
	}
	s := summaryOf(t, dry.TermLog)
	if s.Retention == nil || !s.Retention.DryRun || s.Retention.TimeZone != "Asia/Shanghai" || s.Deleted != 0 {
		t.Fatalf("dry-run summary %+v", s)
	}
	var kept []string
	reasons := map[string][]string{}
	for _, k := range s.Retention.Kept {
		kept = append(kept, k.Artifact)
		reasons[k.Artifact] = k.Reasons
	}
	if !slices.Equal(kept, want) || len(s.Retention.Pruned) != 40-7 {
		t.Fatalf("dry run keeps %v (%d pruned), want %v", kept, len(s.Retention.Pruned), want)
	}
	if !slices.Equal(reasons[verified], []string{contract.KeepVerified}) ||
		!slices.Equal(reasons[path0(res.Artifact)], []string{contract.KeepNewest, contract.KeepDaily}) ||
		!slices.Equal(reasons[planted[0]], []string{contract.KeepDaily}) {
		t.Fatalf("reasons %v", reasons)
	}
	if got := st.Keys(t, job); !slices.Equal(got, keysBefore) {
		t.Fatalf("the dry run changed the store")
	}

	r := e.agent(t, st, db, job, policy, "prune")
	if r.Code != 0 {
		t.Fatalf("prune failed: %s", r.Stderr)
	}
	var left []string
	for _, en := range st.Index(t, job).Entries {
		left = append(left, en.Name)
	}
	slices.Sort(left)
	sorted := slices.Sorted(slices.Values(want))
	if !slices.Equal(left, sorted) {
		t.Fatalf("after prune:\n%s\nwant:\n%s", strings.Join(left, "\n"), strings.Join(sorted, "\n"))
	}
	if _, err := st.TryRead(job.VerifiedKey(verified)); err != nil {
		t.Fatalf("the kept artifact's verification record is gone: %v", err)
	}
	before := fingerprint(t, e.DB, db)
	check(t, e.DB.Drop(db+"_verify"))
	mustSucceed(t, e.agent(t, st, db+"_verify", job, []string{contract.EnvArtifact + "=" + verified}, "restore"))
	if got := fingerprint(t, e.DB, db+"_verify"); got != before {
		t.Fatal("the verified artifact kept by minVerified does not restore the data")
	}

	// A backup prunes after itself and says what it kept.
	b := mustSucceed(t, e.agent(t, st, db, job, policy, "backup"))
	if b.Retention == nil || len(b.Retention.Kept) == 0 || b.Retention.Kept[0].Artifact != path0(b.Artifact) {
		t.Fatalf("backup's retention report %+v", b.Retention)
	}
	// Both forms at once are refused.
	both := e.agent(t, st, db, job, append(slices.Clone(policy), contract.EnvRetentionDays+"=7"), "prune")
	mustFail(t, both, "not both")
	mustExit(t, both, contract.ExitUsage)
}

func path0(artifact string) string { return artifact[strings.LastIndex(artifact, "/")+1:] }

func summaryOf(t *testing.T, termLog string) contract.Summary {
	t.Helper()
	var s contract.Summary
	check(t, jsonUnmarshal(termLog, &s))
	return s
}

func jsonUnmarshal(s string, v any) error { return json.Unmarshal([]byte(strings.TrimSpace(s)), v) }
