package suite

import (
	"bytes"
	"context"
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
