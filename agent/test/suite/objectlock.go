package suite

import (
	"context"
	"path"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/minio/minio-go/v7"

	"cairn.dev/agent/contract"
	"cairn.dev/agent/internal/naming"
	"cairn.dev/agent/internal/testenv"
)

// ObjectLock, against versitygw with bucket versioning and an Object Lock
// bucket: a backup with CAIRN_S3_OBJECT_LOCK writes its artifact and
// manifest locked until start + the lock days; a leaked credential cannot
// delete the locked version (GOVERNANCE without bypass; COMPLIANCE not even
// with it); a prune whose policy no longer keeps a locked artifact does not
// try to delete it, keeps it with reason "locked" and says so, and deletes
// what is not locked.
func ObjectLock(t *testing.T, e *Env) {
	ctx := context.Background()
	st, s3 := lockedBucket(t, "locked")
	db := "lock_s3"
	job := naming.Job{Namespace: "shop", Name: "locked"}
	check(t, e.DB.Seed(db))
	t.Cleanup(func() { e.DB.Drop(db) })

	lock := func(mode string) []string {
		return []string{contract.EnvS3ObjectLock + "=" + mode, contract.EnvS3ObjectLockDays + "=2"}
	}
	first := mustSucceed(t, e.agent(t, st, db, job, lock("COMPLIANCE"), "backup"))
	second := mustSucceed(t, e.agent(t, st, db, job, lock("GOVERNANCE"), "backup"))
	old := plantAt(t, st, job, first, []time.Time{time.Now().AddDate(0, 0, -30)})[0] // not locked

	for _, r := range []*contract.Result{first, second} {
		for _, key := range []string{r.Artifact, path.Join(path.Dir(r.Artifact), "entries", path.Base(r.Artifact)+".json")} {
			info, err := s3.Client().StatObject(ctx, Bucket, key, minio.StatObjectOptions{})
			check(t, err)
			until, err := time.Parse(time.RFC3339, info.Metadata.Get("X-Amz-Object-Lock-Retain-Until-Date"))
			if err != nil || until.Sub(r.Start.AddDate(0, 0, 2)).Abs() > time.Second {
				t.Fatalf("%s: retain-until %q (%v), want %s", key, info.Metadata.Get("X-Amz-Object-Lock-Retain-Until-Date"), err, r.Start.AddDate(0, 0, 2))
			}
		}
	}
	// A leaked credential: the locked versions cannot be removed.
	for _, c := range []struct {
		r      *contract.Result
		bypass bool
	}{{second, false}, {first, true}} {
		info, err := s3.Client().StatObject(ctx, Bucket, c.r.Artifact, minio.StatObjectOptions{})
		check(t, err)
		err = s3.Client().RemoveObject(ctx, Bucket, c.r.Artifact, minio.RemoveObjectOptions{VersionID: info.VersionID, GovernanceBypass: c.bypass})
		if err == nil {
			t.Fatalf("deleting the locked version of %s (bypass %v) succeeded", c.r.Artifact, c.bypass)
		}
	}

	// The policy keeps only the newest: the first is locked (kept, said
	// so), the planted one is not (deleted).
	policy := []string{contract.EnvRetention + `={"keepLast":1}`}
	r := e.agent(t, st, db, job, policy, "prune")
	if r.Code != 0 {
		t.Fatalf("prune failed: %s", r.Stderr)
	}
	if !strings.Contains(r.Stderr, "under S3 Object Lock") || !strings.Contains(r.Stderr, path.Base(first.Artifact)) {
		t.Errorf("prune does not say it kept the locked artifact:\n%s", lastLines(r.Stderr, 8))
	}
	s := summaryOf(t, r.TermLog)
	var keptLocked bool
	for _, k := range s.Retention.Kept {
		if k.Artifact == path.Base(first.Artifact) && slices.Contains(k.Reasons, contract.KeepLocked) {
			keptLocked = true
		}
	}
	if !keptLocked || !slices.Equal(s.Retention.Pruned, []string{old}) {
		t.Fatalf("prune report %+v: want the first kept as locked and only %s pruned", s.Retention, old)
	}
	var left []string
	for _, en := range st.Index(t, job).Entries {
		left = append(left, en.Name)
	}
	if want := []string{path.Base(first.Artifact), path.Base(second.Artifact)}; !slices.Equal(left, want) {
		t.Fatalf("after prune %v, want %v", left, want)
	}

	// Object Lock needs an S3 store.
	pvc := e.NewStore(t, "pvc")
	bad := e.agent(t, pvc, db, job, lock("GOVERNANCE"), "backup")
	mustFail(t, bad, "needs an S3 store")
	mustExit(t, bad, contract.ExitUsage)
}

// lockedBucket starts a versitygw with versioning, makes an Object Lock
// bucket and returns a store under prefix in it.
func lockedBucket(t *testing.T, prefix string) (*Store, *testenv.S3) {
	t.Helper()
	s3, err := testenv.StartS3Versioned(t.TempDir(), t.TempDir(), S3AccessKey, S3SecretKey)
	check(t, err)
	t.Cleanup(s3.Stop)
	check(t, s3.Client().MakeBucket(context.Background(), Bucket, minio.MakeBucketOptions{ObjectLocking: true}))
	return S3Store(t, s3, prefix), s3
}

// lockOf reads an object's Object Lock (mode and retain-until, from HEAD:
// versitygw's GetObjectRetention reply is not one minio-go parses) and its
// version id; key is the full object key.
func lockOf(t *testing.T, cl *minio.Client, key string) (string, time.Time, string) {
	t.Helper()
	info, err := cl.StatObject(context.Background(), Bucket, key, minio.StatObjectOptions{})
	check(t, err)
	v := info.Metadata.Get("X-Amz-Object-Lock-Retain-Until-Date")
	if v == "" {
		return "", time.Time{}, info.VersionID
	}
	u, err := time.Parse(time.RFC3339, v)
	check(t, err)
	return info.Metadata.Get("X-Amz-Object-Lock-Mode"), u, info.VersionID
}
