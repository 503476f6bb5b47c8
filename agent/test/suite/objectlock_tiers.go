package suite

import (
	"context"
	"path"
	"strings"
	"testing"
	"time"

	"github.com/minio/minio-go/v7"

	"cairn.dev/agent/contract"
	"cairn.dev/agent/internal/naming"
)

// ObjectLockExtendedByTiers, against versitygw with an Object Lock bucket:
// with calendar tiers (keepMonthly 12) a prune extends the lock of each
// month's newest backup, once its month is over, to the start of the 12th
// month after it — artifact and manifest, keeping the object's mode; an
// artifact not locked yet is locked in the configured mode; one locked
// longer keeps its date (never shortened); the current month's backup
// keeps its lock days (a later backup may replace it as its month's
// newest). A dry run changes nothing and says what it would do. The report
// gives every kept artifact's date.
func ObjectLockExtendedByTiers(t *testing.T, e *Env) {
	ctx := context.Background()
	st, s3 := lockedBucket(t, "tiers")
	cl := s3.Client()
	db := "lock_tiers"
	job := naming.Job{Namespace: "shop", Name: "monthly"}
	check(t, e.DB.Seed(db))
	t.Cleanup(func() { e.DB.Drop(db) })

	env := []string{contract.EnvS3ObjectLock + "=GOVERNANCE", contract.EnvS3ObjectLockDays + "=2",
		contract.EnvRetention + `={"keepMonthly":12}`, contract.EnvTimeZone + "=UTC"}
	today := mustSucceed(t, e.agent(t, st, db, job, env, "backup"))
	month := time.Date(today.Start.Year(), today.Start.Month(), 1, 0, 0, 0, 0, time.UTC)
	// The newest backups of the three months before this one (the 15th,
	// noon UTC), written without a lock.
	planted := plantAt(t, st, job, today, []time.Time{month.AddDate(0, -1, 14).Add(12 * time.Hour),
		month.AddDate(0, -2, 14).Add(12 * time.Hour), month.AddDate(0, -3, 14).Add(12 * time.Hour)})
	last, longer, compliance := planted[0], planted[1], planted[2]
	keyOf := func(name string) string { return path.Join(path.Dir(today.Artifact), name) }
	manifestOf := func(name string) string { return path.Join(path.Dir(today.Artifact), "entries", name+".json") }
	retain := func(key string, mode minio.RetentionMode, until time.Time) {
		until = until.UTC().Truncate(time.Second)
		check(t, cl.PutObjectRetention(ctx, Bucket, key, minio.PutObjectRetentionOptions{Mode: &mode, RetainUntilDate: &until}))
	}
	// Two months ago: already locked for 5 years, longer than the tier.
	far := time.Now().AddDate(5, 0, 0).UTC().Truncate(time.Second)
	retain(keyOf(longer), minio.Governance, far)
	retain(manifestOf(longer), minio.Governance, far)
	// Three months ago: COMPLIANCE for one more day.
	soon := time.Now().Add(24 * time.Hour).UTC().Truncate(time.Second)
	retain(keyOf(compliance), minio.Compliance, soon)
	retain(manifestOf(compliance), minio.Compliance, soon)

	lockOf := func(key string) (string, time.Time) {
		t.Helper()
		mode, until, _ := lockOf(t, cl, key)
		return mode, until
	}
	want := map[string]struct {
		mode  string
		until time.Time
	}{
		path.Base(today.Artifact): {"GOVERNANCE", today.Start.AddDate(0, 0, 2)}, // its month is open
		last:                      {"GOVERNANCE", month.AddDate(0, 11, 0)},      // last month + 12
		longer:                    {"GOVERNANCE", far},                          // never shortened
		compliance:                {"COMPLIANCE", month.AddDate(0, 9, 0)},       // its mode kept
	}
	expect := func(stage string, extended bool) {
		t.Helper()
		for name, w := range want {
			if !extended && (name == last || name == compliance) {
				continue
			}
			for _, key := range []string{keyOf(name), manifestOf(name)} {
				mode, until := lockOf(key)
				if mode != w.mode || until.Sub(w.until).Abs() > time.Second {
					t.Errorf("%s: %s locked %s until %s, want %s until %s", stage, key, mode, until, w.mode, w.until)
				}
			}
		}
		if !extended {
			if mode, until := lockOf(keyOf(last)); mode != "" || !until.IsZero() {
				t.Errorf("%s: %s locked %s until %s, want not locked", stage, last, mode, until)
			}
			if _, until := lockOf(keyOf(compliance)); !until.Equal(soon) {
				t.Errorf("%s: %s locked until %s, want %s", stage, compliance, until, soon)
			}
		}
	}

	dry := e.agent(t, st, db, job, append(env, contract.EnvPruneDryRun+"=true"), "prune")
	if dry.Code != 0 || !strings.Contains(dry.Stderr, "would extend the S3 Object Lock") {
		t.Fatalf("dry run: exit %d, does not say what it would extend:\n%s", dry.Code, lastLines(dry.Stderr, 10))
	}
	expect("after the dry run", false)

	r := e.agent(t, st, db, job, env, "prune")
	if r.Code != 0 {
		t.Fatalf("prune failed: %s", r.Stderr)
	}
	if !strings.Contains(r.Stderr, "S3 Object Lock extended") {
		t.Errorf("prune does not say it extended locks:\n%s", lastLines(r.Stderr, 10))
	}
	expect("after the prune", true)
	s := summaryOf(t, r.TermLog)
	if len(s.Retention.Kept) != 4 || len(s.Retention.Pruned) != 0 {
		t.Fatalf("report %+v: want all four kept", s.Retention)
	}
	for _, k := range s.Retention.Kept {
		if w := want[k.Artifact]; k.LockedUntil == nil || k.LockedUntil.Sub(w.until).Abs() > time.Second {
			t.Errorf("report: %s lockedUntil %v, want %s", k.Artifact, k.LockedUntil, w.until)
		}
	}
	// Again: nothing left to extend.
	again := e.agent(t, st, db, job, env, "prune")
	if again.Code != 0 || strings.Contains(again.Stderr, "S3 Object Lock extended") {
		t.Fatalf("a second prune: exit %d, extends again:\n%s", again.Code, lastLines(again.Stderr, 10))
	}
	expect("after a second prune", true)
}
