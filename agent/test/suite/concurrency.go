package suite

import (
	"encoding/json"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"cairn.dev/agent/internal/catalog"
	"cairn.dev/agent/internal/naming"
	"cairn.dev/agent/internal/testenv"
	"cairn.dev/agent/result"
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

	var succeeded []*result.Result
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

// assertAllKept checks that every successful backup is listed by the agent
// and stored with the size and checksum it reported.
func assertAllKept(t *testing.T, e *Env, st *Store, db string, job naming.Job, ok []*result.Result, round int) {
	t.Helper()
	lr := e.Agent.Run(append(append(append([]string{}, e.DB.AgentEnv(db)...), st.Env...), "CAIRN_BACKUPJOB="+job.String()), "list")
	if lr.Code != 0 {
		t.Fatalf("round %d: list failed: %s", round, lr.Stderr)
	}
	listed := map[string]result.Result{}
	for _, line := range strings.Split(strings.TrimSpace(lr.Stdout), "\n") {
		if line == "" {
			continue
		}
		var r result.Result
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
func plantExpired(t *testing.T, st *Store, job naming.Job, from *result.Result, n int) {
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
