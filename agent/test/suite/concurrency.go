package suite

import (
	"encoding/json"
	"fmt"
	"path"
	"strings"
	"sync"
	"testing"
	"time"

	"cairn.dev/agent/contract"
	"cairn.dev/agent/internal/catalog"
	"cairn.dev/agent/internal/naming"
	"cairn.dev/agent/internal/testenv"
)

// Concurrency of ConcurrentWriters: per round, this many backups and
// prunes start at once against one store and one BackupJob.
const (
	concurrentRounds  = 3
	concurrentBackups = 8
	concurrentPrunes  = 3
)

// ConcurrentWriters starts rounds of concurrent backups (each pruning after
// itself) and prunes against one store and one BackupJob, as a run-now
// beside a scheduled run, two clusters sharing a bucket, or a prune beside a
// backup would. Every run must succeed, and after each round every
// successful backup so far must be listed by `agent list` and present in
// the store with the size and checksum it reported: no interleaving may
// lose a backup that reported success.
func ConcurrentWriters(t *testing.T, e *Env, kind string) {
	st := e.NewStore(t, kind)
	db := "conc_" + kind
	job := naming.Job{Namespace: "shop", Name: "conc-" + kind}
	check(t, e.DB.Seed(db))
	t.Cleanup(func() { e.DB.Drop(db) })
	base := append(append(append([]string{}, e.DB.AgentEnv(db)...), st.Env...),
		"CAIRN_BACKUPJOB="+job.String(), "CAIRN_RETENTION_DAYS=7", "CAIRN_LOG_LEVEL=info")

	var succeeded []*contract.Result
	for round := 1; round <= concurrentRounds; round++ {
		// Expired backups give the concurrent prunes work: each round
		// they delete these while the backups list theirs.
		if len(succeeded) > 0 {
			plantExpired(t, st, job, succeeded[len(succeeded)-1], 3)
		}
		runs := make([]testenv.Run, concurrentBackups+concurrentPrunes)
		var wg sync.WaitGroup
		for i := range runs {
			cmd := "backup"
			if i >= concurrentBackups {
				cmd = "prune"
			}
			wg.Add(1)
			go func() {
				defer wg.Done()
				runs[i] = e.Agent.Run(base, cmd)
			}()
		}
		wg.Wait()
		var failed []string
		for i, r := range runs {
			if r.Code != 0 {
				failed = append(failed, fmt.Sprintf("%s #%d: exit %d: %s", r.Args[0], i, r.Code, lastLine(r.Stderr)))
				continue
			}
			if i < concurrentBackups {
				res, err := r.Result()
				if err != nil {
					t.Fatalf("round %d: backup #%d: termination message %q: %v", round, i, r.TermLog, err)
				}
				succeeded = append(succeeded, res)
			}
		}
		if len(failed) > 0 {
			t.Errorf("round %d: %d of %d concurrent runs failed:\n%s", round, len(failed), len(runs), strings.Join(failed, "\n"))
		}
		assertAllKept(t, e, st, db, job, succeeded, round)
		assertConsistent(t, st, job, round)
		for _, x := range st.Index(t, job).Entries {
			if time.Since(x.Start) > 7*24*time.Hour {
				t.Errorf("round %d: expired %s is still listed after the prunes", round, x.Name)
			}
		}
		if t.Failed() {
			return
		}
	}
}

// ConcurrentDelete runs deletes (deletionPolicy: Delete) among concurrent
// backups and prunes. Deletes and prunes succeed; a backup may fail (a
// delete removes what it is writing: the operator stops a BackupJob's runs
// before it deletes) but says so; and whatever `agent list` shows
// afterwards is stored with the size and checksum listed: a delete may take
// backups, never leave the catalog pointing at missing or different data.
func ConcurrentDelete(t *testing.T, e *Env, kind string) {
	st := e.NewStore(t, kind)
	db := "concdel_" + kind
	job := naming.Job{Namespace: "shop", Name: "concdel-" + kind}
	check(t, e.DB.Seed(db))
	t.Cleanup(func() { e.DB.Drop(db) })
	base := append(append(append([]string{}, e.DB.AgentEnv(db)...), st.Env...),
		"CAIRN_BACKUPJOB="+job.String(), "CAIRN_RETENTION_DAYS=7", "CAIRN_LOG_LEVEL=info")
	for round := 1; round <= 2; round++ {
		cmds := []string{"backup", "backup", "backup", "prune", "delete", "backup", "backup", "backup", "prune", "delete"}
		runs := make([]testenv.Run, len(cmds))
		var wg sync.WaitGroup
		for i, cmd := range cmds {
			wg.Add(1)
			go func() {
				defer wg.Done()
				runs[i] = e.Agent.Run(base, cmd)
			}()
		}
		wg.Wait()
		for i, r := range runs {
			switch {
			case r.Code == 0:
			case cmds[i] == "backup" && r.Code == contract.ExitFailure:
				t.Logf("round %d: backup #%d failed beside a delete: %s", round, i, lastLine(r.Stderr))
			default:
				t.Errorf("round %d: %s #%d: exit %d: %s", round, cmds[i], i, r.Code, lastLine(r.Stderr))
			}
		}
		lr := e.Agent.Run(base, "list")
		if lr.Code != 0 {
			t.Fatalf("list: %s", lr.Stderr)
		}
		for _, line := range strings.Split(strings.TrimSpace(lr.Stdout), "\n") {
			if line == "" {
				continue
			}
			var l contract.Result
			check(t, json.Unmarshal([]byte(line), &l))
			b, err := st.TryRead(st.KeyOf(t, job, l.Artifact))
			if err != nil || int64(len(b)) != l.Size || sha256Hex(b) != l.Checksum {
				t.Errorf("round %d: listed %s (%d bytes %s) but stored: %d bytes, %v", round, l.Artifact, l.Size, l.Checksum, len(b), err)
			}
		}
	}
}

// assertAllKept checks that every successful backup is listed by the agent
// and stored with the size and checksum it reported.
func assertAllKept(t *testing.T, e *Env, st *Store, db string, job naming.Job, ok []*contract.Result, round int) {
	t.Helper()
	lr := e.Agent.Run(append(append(append([]string{}, e.DB.AgentEnv(db)...), st.Env...), "CAIRN_BACKUPJOB="+job.String()), "list")
	if lr.Code != 0 {
		t.Fatalf("round %d: list failed: %s", round, lr.Stderr)
	}
	listed := map[string]contract.Result{}
	for _, line := range strings.Split(strings.TrimSpace(lr.Stdout), "\n") {
		if line == "" {
			continue
		}
		var r contract.Result
		if err := json.Unmarshal([]byte(line), &r); err != nil {
			t.Fatalf("round %d: list line %q: %v", round, line, err)
		}
		listed[r.Artifact] = r
	}
	var lost []string
	seen := map[string]bool{}
	for _, res := range ok {
		if seen[res.Artifact] {
			lost = append(lost, res.Artifact+": reported by two successful backups")
		}
		seen[res.Artifact] = true
		l, isListed := listed[res.Artifact]
		switch {
		case !isListed:
			lost = append(lost, res.Artifact+": not listed")
		case l.Checksum != res.Checksum || l.Size != res.Size:
			lost = append(lost, fmt.Sprintf("%s: listed as %d bytes %s, backup reported %d bytes %s", res.Artifact, l.Size, l.Checksum, res.Size, res.Checksum))
		}
		stored, err := st.TryRead(st.KeyOf(t, job, res.Artifact))
		if err != nil {
			lost = append(lost, res.Artifact+": "+err.Error())
		} else if int64(len(stored)) != res.Size || sha256Hex(stored) != res.Checksum {
			lost = append(lost, fmt.Sprintf("%s: stored %d bytes %s, backup reported %d bytes %s", res.Artifact, len(stored), sha256Hex(stored), res.Size, res.Checksum))
		}
	}
	if len(lost) > 0 {
		t.Errorf("round %d: %d successful backups, %d listed; lost or damaged:\n%s", round, len(ok), len(listed), strings.Join(lost, "\n"))
	}
}

// plantExpired stores n copies of a successful backup as if taken 30 days
// ago, listed the way the agent lists them.
func plantExpired(t *testing.T, st *Store, job naming.Job, from *contract.Result, n int) {
	t.Helper()
	data := st.Read(t, st.KeyOf(t, job, from.Artifact))
	for i := 0; i < n; i++ {
		e := catalog.Entry{Size: from.Size, Checksum: from.Checksum, Engine: from.Engine,
			Start:  from.Start.Add(-30*24*time.Hour + time.Duration(i)*time.Minute).UTC().Truncate(time.Millisecond),
			Format: "aged", Compression: "zstd"}
		e.End = e.Start.Add(time.Second)
		var err error
		e.Name, err = naming.ArtifactNameToken(job, e.Engine, e.Start, naming.NewToken())
		check(t, err)
		st.Write(t, job.Key(e.Name), data)
		m, err := catalog.EncodeManifest(job, e)
		check(t, err)
		st.Write(t, job.ManifestKey(e.Name), m)
	}
}

// assertConsistent checks the store after runs that all succeeded: every
// artifact has its manifest and every manifest its artifact, no marker or
// temporary file is left.
func assertConsistent(t *testing.T, st *Store, job naming.Job, round int) {
	t.Helper()
	keys := st.Keys(t, job)
	has := map[string]bool{}
	for _, k := range keys {
		has[k] = true
	}
	for _, k := range keys {
		if name, ok := catalog.ManifestName(job, k); ok {
			if !has[job.Key(name)] {
				t.Errorf("round %d: manifest %s without its artifact", round, k)
			}
			continue
		}
		if _, ok := catalog.MarkerName(job, k); ok {
			t.Errorf("round %d: marker %s left by a finished run", round, k)
			continue
		}
		name := path.Base(k)
		if _, _, err := naming.ParseArtifactName(job, name); err != nil || k != job.Key(name) {
			t.Errorf("round %d: unexpected object %s", round, k)
			continue
		}
		if !has[job.ManifestKey(name)] {
			t.Errorf("round %d: artifact %s has no manifest", round, k)
		}
	}
}
