package data_test

import (
	"context"
	"fmt"
	"path"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	"k8s.io/client-go/util/retry"
	"sigs.k8s.io/controller-runtime/pkg/client"

	backupv1 "cairn.dev/apis/backup/v1"
	"cairn.dev/e2e/fixtures"
)

// middayZone is a fixed-offset zone (Etc/GMT±N) where it is now about
// noon, so that runs a few minutes apart fall on one local day whenever
// the test runs.
func middayZone(now time.Time) string {
	off := (12 - now.UTC().Hour() + 24) % 24
	if off > 12 {
		off -= 24 // UTC-11 … UTC+12
	}
	if off == 0 {
		return "Etc/GMT"
	}
	// The Etc names' sign is POSIX's: Etc/GMT-5 is UTC+5.
	return fmt.Sprintf("Etc/GMT%+d", -off)
}

// Calendar tiers on a real store (PostgreSQL to a PVC), pruned by the
// backup runs themselves: spec.retention {keepLast 1, keepDaily 2} in a
// zone where it is midday. Two runs on one day: the older is neither the
// last nor its day's newest, so the second run's prune deletes it from the
// store and status.retention says so, the kept one with its reasons. The
// survivor moved two days back (its manifest and name; ageCatalog): the
// next run keeps it as its day's newest (daily) beside itself. With
// dryRun and keepDaily 1, the next run reports both older ones as pruned
// and deletes nothing.
func TestRetentionTiersOnRealStore(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	e := postgres()
	ns := namespace(t, e)
	src := dbName(ns, "shop")
	g.Expect(e.seed(src, 200)).To(Succeed())
	bj := backupJob(ns, "tiers", e, src, fixtures.Yearly, pvcStorage(t, ns, "backups"))
	bj.Spec.TimeZone = middayZone(time.Now())
	bj.Spec.RetentionDays = 0 // one or the other: calendar tiers here
	bj.Spec.Retention = &backupv1.RetentionPolicy{KeepLast: 1, KeepDaily: 2}
	g.Expect(env.Client.Create(ctx, bj)).To(Succeed())
	t.Logf("time zone %s", bj.Spec.TimeZone)

	run := func(id string) backupv1.BackupJobStatus {
		t.Helper()
		before := time.Now()
		fixtures.SetRunNow(g, env.Client, bj, id)
		st := waitSucceeded(t, bj, before, 3*time.Minute)
		g.Expect(st.Retention).NotTo(BeNil(), "run %s: no status.retention", id)
		t.Logf("run %s: %s kept %+v pruned %v dryRun %v", id, path.Base(st.LastArtifact.Path), st.Retention.Kept, st.Retention.Pruned, st.Retention.DryRun)
		return st
	}
	names := func() []string {
		var out []string
		for _, a := range artifacts(t, bj) {
			out = append(out, path.Base(a))
		}
		return out
	}

	a := path.Base(run("one").LastArtifact.Path)
	st := run("two")
	b := path.Base(st.LastArtifact.Path)
	g.Expect(st.Retention.TimeZone).To(Equal(bj.Spec.TimeZone))
	g.Expect(st.Retention.DryRun).To(BeFalse())
	g.Expect(st.Retention.Kept).To(Equal([]backupv1.KeptArtifact{{Artifact: b, Reasons: []string{"newest", "last", "daily"}}}))
	g.Expect(st.Retention.Pruned).To(Equal([]string{a}))
	g.Expect(names()).To(ConsistOf(b), "the pruned artifact is gone from the store")

	ageCatalog(t, bj, 48*time.Hour)
	aged := names()
	g.Expect(aged).To(HaveLen(1))
	st = run("three")
	c := path.Base(st.LastArtifact.Path)
	g.Expect(st.Retention.Kept).To(Equal([]backupv1.KeptArtifact{
		{Artifact: c, Reasons: []string{"newest", "last", "daily"}},
		{Artifact: aged[0], Reasons: []string{"daily"}},
	}), "two days ago's newest is kept by the daily tier")
	g.Expect(st.Retention.Pruned).To(BeEmpty())
	g.Expect(names()).To(ConsistOf(c, aged[0]))

	// Dry run, one day: both older ones would go; nothing is deleted.
	g.Expect(retry.RetryOnConflict(retry.DefaultRetry, func() error {
		cur := &backupv1.BackupJob{}
		if err := env.Client.Get(ctx, client.ObjectKeyFromObject(bj), cur); err != nil {
			return err
		}
		cur.Spec.Retention = &backupv1.RetentionPolicy{KeepLast: 1, KeepDaily: 1, DryRun: true}
		return env.Client.Update(ctx, cur)
	})).To(Succeed())
	g.Eventually(func(g Gomega) int64 { return fixtures.Get(g, env.Client, bj).Status.ObservedGeneration }).
		WithTimeout(time.Minute).Should(BeNumerically(">=", fixtures.Get(g, env.Client, bj).Generation))
	st = run("four")
	d := path.Base(st.LastArtifact.Path)
	g.Expect(st.Retention.DryRun).To(BeTrue())
	g.Expect(st.Retention.Kept).To(Equal([]backupv1.KeptArtifact{{Artifact: d, Reasons: []string{"newest", "last", "daily"}}}))
	g.Expect(st.Retention.Pruned).To(Equal([]string{c, aged[0]}), "newest first")
	g.Expect(names()).To(ConsistOf(d, c, aged[0]), "a dry run deletes nothing")
}
