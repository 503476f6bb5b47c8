package suite

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/minio/minio-go/v7"

	"cairn.dev/agent/contract"
	"cairn.dev/agent/internal/catalog"
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

// CorruptedRefused flips one byte of an artifact: restore must refuse it
// with a clear error before touching the target.
func CorruptedRefused(t *testing.T, e *Env, kind string) {
	st := e.NewStore(t, kind)
	db := "corrupt_" + kind
	job := naming.Job{Namespace: "shop", Name: "corrupt-" + kind}
	check(t, e.DB.Seed(db))
	t.Cleanup(func() { e.DB.Drop(db) })
	res := mustSucceed(t, e.agent(t, st, db, job, nil, "backup"))
	key := st.KeyOf(t, job, res.Artifact)
	data := st.Read(t, key)
	data[len(data)/2] ^= 0x01
	st.Write(t, key, data)

	// The target has changed since the backup: a restore would undo that.
	check(t, e.DB.Mutate(db))
	target := fingerprint(t, e.DB, db)

	r := e.agent(t, st, db, job, nil, "restore")
	reason := mustFail(t, r, "corrupted", "checksum", path.Base(key), "not touched")
	mustExit(t, r, contract.ExitCorrupted)
	t.Logf("reason: %s", reason)
	if after := fingerprint(t, e.DB, db); after != target {
		t.Fatalf("the target database changed although the restore was refused")
	}
	// Truncation is refused too.
	st.Write(t, key, data[:len(data)-10])
	r = e.agent(t, st, db, job, nil, "restore")
	mustFail(t, r, "corrupted")
	mustExit(t, r, contract.ExitCorrupted)
	if after := fingerprint(t, e.DB, db); after != target {
		t.Fatalf("the target database changed although the restore was refused")
	}
}

// StoreUnreachablePVC: a PVC that is not mounted gives a clear error, and
// the catalog is untouched.
func StoreUnreachablePVC(t *testing.T, e *Env) {
	st := e.NewStore(t, "pvc")
	db := "unreach_pvc"
	job := naming.Job{Namespace: "shop", Name: "unreachable"}
	check(t, e.DB.Seed(db))
	t.Cleanup(func() { e.DB.Drop(db) })
	mustSucceed(t, e.agent(t, st, db, job, nil, "backup"))
	cat := st.IndexBytes(t, job)
	missing := filepath.Join(t.TempDir(), "not-mounted")
	mustFail(t, e.agent(t, st, db, job, []string{"CAIRN_PVC_PATH=" + missing}, "backup"), "unreachable", missing, "does not exist")
	if got := st.IndexBytes(t, job); !bytes.Equal(got, cat) {
		t.Fatalf("catalog changed:\n%s\nwas:\n%s", got, cat)
	}
	if _, err := os.Stat(missing); err == nil {
		t.Fatalf("the agent created the missing mount path")
	}
}

// StoreUnreachableS3: the S3 server goes away between two backups; the
// second fails with a clear error, and when the server is back the catalog
// is as it was and restorable.
func StoreUnreachableS3(t *testing.T, e *Env) {
	root := t.TempDir()
	s3, err := testenv.StartS3(root, S3AccessKey, S3SecretKey)
	check(t, err)
	t.Cleanup(s3.Stop)
	check(t, s3.MakeBucket(Bucket))
	st := S3Store(t, s3, "unreachable")
	db := "unreach_s3"
	job := naming.Job{Namespace: "shop", Name: "unreachable"}
	check(t, e.DB.Seed(db))
	t.Cleanup(func() { e.DB.Drop(db) })
	first := mustSucceed(t, e.agent(t, st, db, job, nil, "backup"))
	cat := st.IndexBytes(t, job)
	before := fingerprint(t, e.DB, db)

	s3.Halt()
	// An outage may end: retryable.
	for _, cmd := range []string{"backup", "restore"} {
		r := e.agent(t, st, db, job, nil, cmd)
		mustFail(t, r, "unreachable", s3.Endpoint())
		mustExit(t, r, contract.ExitFailure)
	}

	check(t, s3.Start()) // same data, new port
	st = S3Store(t, s3, "unreachable")
	if got := st.IndexBytes(t, job); !bytes.Equal(got, cat) {
		t.Fatalf("catalog changed:\n%s\nwas:\n%s", got, cat)
	}
	check(t, e.DB.Drop(db))
	rr := mustSucceed(t, e.agent(t, st, db, job, nil, "restore"))
	if rr.Checksum != first.Checksum {
		t.Errorf("restored %s, want the first backup %s", rr.Artifact, first.Artifact)
	}
	if after := fingerprint(t, e.DB, db); after != before {
		t.Fatalf("restored database differs")
	}
}

// KilledMidStream kills the agent (SIGKILL) while its dump is streaming
// into the store: the catalog must be unchanged, no artifact may appear,
// and the earlier backup must restore.
func KilledMidStream(t *testing.T, e *Env, kind string) {
	st := e.NewStore(t, kind)
	db := "killed_" + kind
	job := naming.Job{Namespace: "shop", Name: "killed-" + kind}
	check(t, e.DB.Seed(db))
	t.Cleanup(func() { e.DB.Drop(db) })
	good := mustSucceed(t, e.agent(t, st, db, job, nil, "backup"))
	goodPrint := fingerprint(t, e.DB, db)
	cat := st.IndexBytes(t, job)
	keysBefore := st.Keys(t, job)

	// Enough incompressible data that the store receives several parts
	// before the proxy in front of the database stops passing data.
	check(t, e.DB.SeedBig(db, 40))
	proxy, err := testenv.NewStallProxy("127.0.0.1:"+itoa(e.DB.Port()), 24<<20)
	check(t, err)
	defer proxy.Close()

	env := append(append(append([]string{}, e.DB.AgentEnv(db)...), st.Env...),
		"CAIRN_BACKUPJOB="+job.String(), "CAIRN_DB_PORT="+itoa(proxy.Port()), "CAIRN_S3_PART_SIZE_MIB=5")
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	cmd, _, err := e.Agent.Command(ctx, env, "backup")
	check(t, err)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	check(t, cmd.Start())
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()

	select {
	case <-proxy.Stalled():
	case err := <-exited:
		t.Fatalf("backup ended before the proxy stalled it (%v): %s", err, stderr.String())
	case <-ctx.Done():
		t.Fatal("the proxy never stalled")
	}
	// Wait until partial data is in the store, then kill the agent.
	err = testenv.Poll(time.Minute, 50*time.Millisecond, func() error { return partialData(st, job) })
	if err != nil {
		t.Fatalf("no partial data in the store while the backup was stalled: %v\n%s", err, stderr.String())
	}
	check(t, cmd.Process.Signal(syscall.SIGKILL))
	<-exited
	// The dump tool died with the agent (parent-death signal); drop its
	// server session too, or it holds its snapshot until a server timeout.
	proxy.Close()
	t.Logf("killed mid-stream after %d MiB from the database; agent log:\n%s", proxy.Passed()>>20, stderr.String())

	if got := st.IndexBytes(t, job); !bytes.Equal(got, cat) {
		t.Fatalf("catalog changed by the killed backup:\n%s\nwas:\n%s", got, cat)
	}
	for _, k := range st.Keys(t, job) {
		// Its in-progress marker stays until a prune finds it stale.
		_, marker := catalog.MarkerName(job, k)
		if !slices.Contains(keysBefore, k) && !strings.Contains(path.Base(k), ".partial-") && !marker {
			t.Errorf("the killed backup left a complete-looking object %s", k)
		}
	}
	lr := e.agent(t, st, db, job, nil, "list")
	if lr.Code != 0 || strings.Count(lr.Stdout, "\n") != 1 || !strings.Contains(lr.Stdout, good.Artifact) {
		t.Fatalf("list after the kill: exit %d, %q; want only %s", lr.Code, lr.Stdout, good.Artifact)
	}
	check(t, e.DB.Drop(db))
	rr := mustSucceed(t, e.agent(t, st, db, job, nil, "restore"))
	if rr.Artifact != good.Artifact {
		t.Fatalf("restored %s, want %s", rr.Artifact, good.Artifact)
	}
	if after := fingerprint(t, e.DB, db); after != goodPrint {
		t.Fatalf("restore of the earlier backup differs")
	}
	// And the store is not wedged: the next backup works.
	mustSucceed(t, e.agent(t, st, db, job, nil, "backup"))
}

// partialData reports nil once the store holds some bytes of an
// interrupted write: a hidden partial file on a PVC, an uploaded part on S3.
func partialData(st *Store, job naming.Job) error {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if st.Kind == "pvc" {
		objs, err := st.Open.List(ctx, job.Dir())
		if err != nil {
			return err
		}
		for _, o := range objs {
			if strings.Contains(o.Key, ".partial-") && o.Size > 0 {
				return nil
			}
		}
		return errorf("no partial file yet")
	}
	c := st.S3.Client()
	prefix := st.Open.Path(job.Dir()) + "/"
	for up := range c.ListIncompleteUploads(ctx, Bucket, prefix, true) {
		if up.Err != nil {
			return up.Err
		}
		parts, err := (&minio.Core{Client: c}).ListObjectParts(ctx, Bucket, up.Key, up.UploadID, 0, 10)
		if err != nil {
			return err
		}
		if len(parts.ObjectParts) > 0 {
			return nil
		}
	}
	return errorf("no uploaded part yet")
}

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

// WrongPassword: a wrong database password fails clearly, and neither the
// wrong nor any right secret is printed.
func WrongPassword(t *testing.T, e *Env, kind string, wantReason string) {
	st := e.NewStore(t, kind)
	db := "wrongpw_" + kind
	job := naming.Job{Namespace: "shop", Name: "wrongpw-" + kind}
	check(t, e.DB.Seed(db))
	t.Cleanup(func() { e.DB.Drop(db) })
	const wrong = "wrong-PASSWORD-0d9e8f7a-do-not-print"
	r := e.agent(t, st, db, job, []string{"CAIRN_DB_PASSWORD=" + wrong}, "backup")
	mustFail(t, r, wantReason)
	mustExit(t, r, contract.ExitFailure) // the Secret may be fixed before the retry
	noSecrets(t, r, wrong)
	if c := st.IndexBytes(t, job); c != nil {
		t.Fatalf("a failed backup wrote an index: %s", c)
	}
	if keys := st.Keys(t, job); len(keys) != 0 {
		t.Fatalf("a failed backup left objects: %v", keys)
	}
	// Same for restore, from a good backup.
	mustSucceed(t, e.agent(t, st, db, job, nil, "backup"))
	r = e.agent(t, st, db, job, []string{"CAIRN_DB_PASSWORD=" + wrong}, "restore")
	mustFail(t, r, wantReason)
	noSecrets(t, r, wrong)
	// A password passed as an argument is refused without echoing it.
	r = e.agent(t, st, db, job, nil, "backup", "--db-password="+wrong)
	mustFail(t, r, "never taken from arguments")
	mustExit(t, r, contract.ExitUsage)
	noSecrets(t, r, wrong)
	// So is an invalid setting, before anything is read or written.
	r = e.agent(t, st, db, job, []string{"CAIRN_COMPRESSION=maximal"}, "backup")
	mustFail(t, r, "compression")
	mustExit(t, r, contract.ExitUsage)
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

// Version checks the stamped version.
func Version(t *testing.T, e *Env) {
	r := e.Agent.Run(nil, "--version")
	if r.Code != 0 || strings.TrimSpace(r.Stdout) != "test" {
		t.Fatalf("agent --version: exit %d, %q, want \"test\"", r.Code, r.Stdout)
	}
}

// WrongS3Credentials: a wrong secret key fails clearly without printing it,
// and nothing is written.
func WrongS3Credentials(t *testing.T, e *Env) {
	st := e.NewStore(t, "s3")
	db := "wrongs3"
	job := naming.Job{Namespace: "shop", Name: "wrong-s3"}
	check(t, e.DB.Seed(db))
	t.Cleanup(func() { e.DB.Drop(db) })
	const wrong = "wrong-S3-SECRET-4a5b6c7d-do-not-print"
	r := e.agent(t, st, db, job, []string{"AWS_SECRET_ACCESS_KEY=" + wrong}, "backup")
	mustFail(t, r, "access denied", "AWS_SECRET_ACCESS_KEY")
	noSecrets(t, r, wrong)
	if keys := st.Keys(t, job); len(keys) != 0 {
		t.Fatalf("a backup with wrong credentials left objects: %v", keys)
	}
}
