package suite

import (
	"bytes"
	"encoding/json"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"cairn.dev/agent/contract"
	"cairn.dev/agent/internal/naming"
	"cairn.dev/agent/internal/testenv"
)

// Stores are the store kinds every scenario runs against.
var Stores = []string{"pvc", "s3"}

// agent runs the agent with the database, store and job configured.
func (e *Env) agent(t *testing.T, st *Store, db string, job naming.Job, extra []string, args ...string) testenv.Run {
	t.Helper()
	env := append(append(append([]string{}, e.DB.AgentEnv(db)...), st.Env...), "CAIRN_BACKUPJOB="+job.String())
	r := e.Agent.Run(append(env, extra...), args...)
	t.Logf("agent %s: exit %d in %s\nstdout: %s\nstderr: %s", strings.Join(args, " "), r.Code, r.Elapsed.Round(time.Millisecond), r.Stdout, r.Stderr)
	return r
}

// mustSucceed checks a backup or restore run and returns its result.
func mustSucceed(t *testing.T, r testenv.Run) *contract.Result {
	t.Helper()
	if r.Code != 0 {
		t.Fatalf("agent %v failed with exit %d: %s", r.Args, r.Code, r.Stderr)
	}
	res, err := r.Result()
	if err != nil {
		t.Fatalf("termination message %q: %v", r.TermLog, err)
	}
	if strings.Count(r.TermLog, "\n") != 1 || len(r.TermLog) > contract.MaxMessageBytes {
		t.Fatalf("termination message is not one line of at most 4096 bytes: %q", r.TermLog)
	}
	if strings.TrimSpace(r.Stdout) != strings.TrimSpace(r.TermLog) {
		t.Fatalf("stdout %q differs from the termination message %q", r.Stdout, r.TermLog)
	}
	return res
}

// mustFail checks a failed run: non-zero exit, a one-line reason on
// stderr and in the termination message, and no credential anywhere.
func mustFail(t *testing.T, r testenv.Run, wantInReason ...string) string {
	t.Helper()
	if r.Code == 0 {
		t.Fatalf("agent %v succeeded, want failure; stdout %s", r.Args, r.Stdout)
	}
	_, err := contract.Parse(r.TermLog)
	var failed *contract.FailedError
	if !asFailed(err, &failed) {
		t.Fatalf("termination message %q is not a failure: %v", r.TermLog, err)
	}
	if strings.Count(r.TermLog, "\n") != 1 {
		t.Fatalf("failure message is not one line: %q", r.TermLog)
	}
	for _, want := range wantInReason {
		if !strings.Contains(strings.ToLower(failed.Reason), strings.ToLower(want)) {
			t.Errorf("failure reason %q does not mention %q", failed.Reason, want)
		}
	}
	lastLine := lastLine(r.Stderr)
	if !strings.HasPrefix(lastLine, "agent: ") || !strings.Contains(lastLine, failed.Reason) {
		t.Errorf("last stderr line %q does not give the reason %q", lastLine, failed.Reason)
	}
	noSecrets(t, r)
	return failed.Reason
}

// mustExit checks a failed run's exit code: the operators' Job
// podFailurePolicy retries contract.ExitFailure and fails the Job at once on
// contract.ExitUsage and contract.ExitCorrupted.
func mustExit(t *testing.T, r testenv.Run, code int) {
	t.Helper()
	if r.Code != code {
		t.Errorf("agent %v exited %d, want %d", r.Args, r.Code, code)
	}
}

func asFailed(err error, target **contract.FailedError) bool {
	f, ok := err.(*contract.FailedError)
	if ok {
		*target = f
	}
	return ok
}

func lastLine(s string) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	return lines[len(lines)-1]
}

// noSecrets checks that no credential appears in anything the agent printed.
func noSecrets(t *testing.T, r testenv.Run, extra ...string) {
	t.Helper()
	for _, secret := range append([]string{S3SecretKey, DBPassword}, extra...) {
		for name, out := range map[string]string{"stdout": r.Stdout, "stderr": r.Stderr, "termination message": r.TermLog} {
			if strings.Contains(out, secret) {
				t.Errorf("%s contains a secret (%q)", name, secret)
			}
		}
	}
}

func fingerprint(t *testing.T, db DB, name string) string {
	t.Helper()
	fp, err := db.Fingerprint(name)
	if err != nil {
		t.Fatalf("fingerprint %s: %v", name, err)
	}
	return fp
}

func check(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// RoundTrip seeds a database, backs it up, drops it, restores it (once in
// place, once into a new database) and compares row counts and checksums.
func RoundTrip(t *testing.T, e *Env, kind string) {
	st := e.NewStore(t, kind)
	db := "rt_" + kind
	job := naming.Job{Namespace: "shop", Name: "orders-" + kind}
	check(t, e.DB.Seed(db))
	t.Cleanup(func() { e.DB.Drop(db); e.DB.Drop(db + "_copy") })
	before := fingerprint(t, e.DB, db)
	if !strings.Contains(before, "customers") || strings.Contains(before, "\tcustomers\t0\t") {
		t.Fatalf("seed produced no data: %s", before)
	}

	// On a PVC, read the password from a mounted file.
	var extra []string
	if kind == "pvc" {
		pwFile := filepath.Join(t.TempDir(), "password")
		check(t, os.WriteFile(pwFile, []byte(DBPassword+"\n"), 0o600))
		extra = []string{"CAIRN_DB_PASSWORD=", "CAIRN_DB_PASSWORD_FILE=" + pwFile}
	}
	start := time.Now().Add(-time.Second)
	res := mustSucceed(t, e.agent(t, st, db, job, extra, "backup"))
	if res.Engine != e.DB.Engine() {
		t.Errorf("engine %q, want %q", res.Engine, e.DB.Engine())
	}
	if res.Start.Before(start) || res.End.Before(res.Start) || res.DurationSeconds < 0 {
		t.Errorf("implausible times: start %s end %s duration %v", res.Start, res.End, res.DurationSeconds)
	}
	key := st.KeyOf(t, job, res.Artifact)
	if _, _, err := naming.ParseArtifactName(job, path.Base(key)); err != nil {
		t.Errorf("artifact name: %v", err)
	}
	stored := st.Read(t, key)
	if int64(len(stored)) != res.Size || sha256Hex(stored) != res.Checksum {
		t.Fatalf("stored artifact has %d bytes %s; result says %d bytes %s", len(stored), sha256Hex(stored), res.Size, res.Checksum)
	}
	if !bytes.HasPrefix(stored, []byte{0x28, 0xb5, 0x2f, 0xfd}) {
		t.Errorf("artifact is not a zstd stream: % x", stored[:4])
	}

	// list shows it.
	lr := e.agent(t, st, db, job, nil, "list")
	if lr.Code != 0 {
		t.Fatalf("list failed: %s", lr.Stderr)
	}
	var listed contract.Result
	check(t, json.Unmarshal([]byte(strings.TrimSpace(lr.Stdout)), &listed))
	if listed.Artifact != res.Artifact || listed.Checksum != res.Checksum || listed.Size != res.Size {
		t.Errorf("list shows %+v, backup reported %+v", listed, res)
	}

	// Drop, restore in place, compare.
	check(t, e.DB.Drop(db))
	rr := mustSucceed(t, e.agent(t, st, db, job, extra, "restore"))
	if rr.Artifact != res.Artifact || rr.Checksum != res.Checksum || rr.Engine != res.Engine {
		t.Errorf("restore reported %+v, want the artifact %+v", rr, res)
	}
	if after := fingerprint(t, e.DB, db); after != before {
		t.Fatalf("restored database differs.\nbefore:\n%s\nafter:\n%s", before, after)
	}

	// Restore over the live, changed database — the database the backup was
	// taken of, so only with allowOverwriteSource (docs/safety.md §1): the
	// backup's state returns.
	check(t, e.DB.Mutate(db))
	if fingerprint(t, e.DB, db) == before {
		t.Fatal("Mutate changed nothing")
	}
	mustSucceed(t, e.agent(t, st, db, job, append(slices.Clone(extra), contract.EnvAllowOverwriteSource+"=true"), "restore"))
	if after := fingerprint(t, e.DB, db); after != before {
		t.Fatalf("restore over the changed database differs.\nbefore:\n%s\nafter:\n%s", before, after)
	}

	// Restore by name into another database: only the store's coordinates
	// and the job key are needed (a fresh cluster).
	rr2 := mustSucceed(t, e.agent(t, st, db+"_copy", job, []string{"CAIRN_ARTIFACT=" + path.Base(res.Artifact)}, "restore"))
	if rr2.Artifact != res.Artifact {
		t.Errorf("restored %s, want %s", rr2.Artifact, res.Artifact)
	}
	if after := fingerprint(t, e.DB, db+"_copy"); after != before {
		t.Fatalf("copy differs.\nbefore:\n%s\nafter:\n%s", before, after)
	}
}

// Version checks the stamped version.
func Version(t *testing.T, e *Env) {
	r := e.Agent.Run(nil, "--version")
	if r.Code != 0 || strings.TrimSpace(r.Stdout) != "test" {
		t.Fatalf("agent --version: exit %d, %q, want \"test\"", r.Code, r.Stdout)
	}
}
