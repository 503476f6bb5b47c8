package suite

import (
	"context"
	"path"
	"strings"
	"testing"
	"time"

	"github.com/minio/minio-go/v7"

	"cairn.dev/agent/contract"
	"cairn.dev/agent/internal/catalog"
	"cairn.dev/agent/internal/naming"
)

// ObjectLockParts (MySQL, versitygw with an Object Lock bucket): a
// multi-part artifact is its index and its parts. Last month's newest
// backup (planted unlocked: index, every part, manifest) is kept 12 months
// by the tiers; a prune extends the lock of its index, manifest and every
// part to the 12th month after it — and a leaked credential then cannot
// delete a part's data (a version delete is refused).
func ObjectLockParts(t *testing.T, e *Env) {
	ctx := context.Background()
	st, s3 := lockedBucket(t, "partlock")
	cl := s3.Client()
	db := "lock_parts"
	job := naming.Job{Namespace: "shop", Name: "parts-locked"}
	t.Cleanup(func() { e.DB.Drop(db) })
	env := []string{contract.EnvS3ObjectLock + "=GOVERNANCE", contract.EnvS3ObjectLockDays + "=2",
		contract.EnvRetention + `={"keepMonthly":12}`, contract.EnvTimeZone + "=UTC"}
	today, _ := partsBackup(t, e, st, db, job, 3, env...)
	var err error
	entry, ok := st.Index(t, job).Find(today.Artifact)
	if !ok {
		t.Fatalf("%s is not in the catalog", today.Artifact)
	}

	// Plant last month's newest backup: the same index and parts under a
	// name of the 15th of last month, unlocked.
	month := time.Date(today.Start.Year(), today.Start.Month(), 1, 0, 0, 0, 0, time.UTC)
	planted := entry
	planted.Start = month.AddDate(0, -1, 14).Add(12 * time.Hour)
	planted.End = planted.Start.Add(time.Second)
	planted.Name, err = naming.ArtifactNameToken(job, entry.Engine, planted.Start, naming.NewToken())
	check(t, err)
	if planted.Name, err = naming.ToParts(planted.Name); err != nil {
		t.Fatal(err)
	}
	st.Write(t, job.Key(planted.Name), st.Read(t, job.Key(entry.Name)))
	objs, err := st.Open.List(ctx, job.PartsDir(entry.Name))
	check(t, err)
	var partKeys []string
	for _, o := range objs {
		k := job.PartKey(planted.Name, path.Base(o.Key))
		st.Write(t, k, st.Read(t, o.Key))
		partKeys = append(partKeys, k)
	}
	if len(partKeys) < 2 {
		t.Fatalf("the artifact has %d part(s), want several", len(partKeys))
	}
	m, err := catalog.EncodeManifest(job, planted)
	check(t, err)
	st.Write(t, job.ManifestKey(planted.Name), m)

	full := func(key string) string { return st.Open.Path(key) }
	lockOf := func(key string) (string, time.Time, string) {
		t.Helper()
		return lockOf(t, cl, full(key))
	}
	if mode, _, _ := lockOf(partKeys[0]); mode != "" {
		t.Fatalf("the planted part is locked (%s) before the prune", mode)
	}

	r := e.agent(t, st, db, job, env, "prune")
	if r.Code != 0 {
		t.Fatalf("prune failed: %s", r.Stderr)
	}
	want := month.AddDate(0, 11, 0) // last month + 12
	for _, key := range append([]string{job.Key(planted.Name), job.ManifestKey(planted.Name)}, partKeys...) {
		mode, until, _ := lockOf(key)
		if mode != "GOVERNANCE" || until.Sub(want).Abs() > time.Second {
			t.Errorf("%s locked %q until %s, want GOVERNANCE until %s", key, mode, until, want)
		}
	}
	// A leaked credential deleting a part's data (its version, not just a
	// delete marker) is refused.
	_, _, version := lockOf(partKeys[0])
	err = cl.RemoveObject(ctx, Bucket, full(partKeys[0]), minio.RemoveObjectOptions{VersionID: version})
	if err == nil || !strings.Contains(strings.ToLower(err.Error()), "lock") && !strings.Contains(strings.ToLower(err.Error()), "denied") && !strings.Contains(strings.ToLower(err.Error()), "retention") {
		t.Errorf("deleting a locked part's version: %v, want it refused", err)
	}
}
