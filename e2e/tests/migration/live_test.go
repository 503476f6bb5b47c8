package migration_test

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"cairn.dev/agent/test/load"
	cairnv1 "cairn.dev/apis/meta/v1"
	migrationv1 "cairn.dev/apis/migration/v1"
)

// A Continuous PostgreSQL migration of a live database, as issue 31 tried
// it: a 300,000-row table (bigint primary key) and a table without one
// (REPLICA IDENTITY FULL) take a steady write load — inserts, updates and
// deletes, paced, measured — from before the MigrationJob is created until
// the writers are declared stopped. Verification converges under it (no
// table differs; status.replication shows the lag in bytes and seconds),
// the migration reaches ReadyForCutover, the load stops, the cutover
// compares exactly and switches; after it source and target are equal
// table by table (counts + checksums), with every row the load inserted
// and none it deleted.
func TestPostgresContinuousUnderLoad(t *testing.T) {
	for _, rate := range []int{100, 1000} {
		t.Run(strconv.Itoa(rate)+"rows-per-s", func(t *testing.T) { continuousUnderLoad(t, rate) })
	}
}

func continuousUnderLoad(t *testing.T, rate int) {
	g := NewWithT(t)
	ctx := context.Background()
	d := engine(cairnv1.PostgresEngine)
	mj, _, dst := setup(t, g, d, 1000, migrationv1.TransferSpec{}, migrationv1.CutoverSpec{Mode: migrationv1.CutoverManual,
		SwitchSecret: &cairnv1.LocalObjectReference{Name: "app-db"}})
	mj.Spec.Mode = migrationv1.ModeContinuous
	src := mj.Spec.Source.Database
	const rows = 300000
	_, err := d.server.SQL(src, fmt.Sprintf(`CREATE TABLE live_events (id bigserial PRIMARY KEY, v int NOT NULL, note text, at timestamptz NOT NULL DEFAULT now());
INSERT INTO live_events (v, note) SELECT i, md5(i::text) FROM generate_series(1, %d) i;
CREATE TABLE live_log (id bigserial NOT NULL, v int NOT NULL);
ALTER TABLE live_log REPLICA IDENTITY FULL;
INSERT INTO live_log (v) SELECT i FROM generate_series(1, 2000) i`, rows))
	g.Expect(err).NotTo(HaveOccurred())
	dsn := fmt.Sprintf("host=127.0.0.1 port=%d dbname=%s user=%s password=%s sslmode=disable", d.port, src, d.user, d.pass)
	events, err := load.Start(dsn, "live_events", rate, 15*time.Minute)
	g.Expect(err).NotTo(HaveOccurred())
	defer events.Stop()
	logs, err := load.Start(dsn, "live_log", max(rate/10, 10), 15*time.Minute)
	g.Expect(err).NotTo(HaveOccurred())
	defer logs.Stop()

	created := time.Now()
	g.Expect(env.Client.Create(ctx, mj)).To(Succeed())
	var cur *migrationv1.MigrationJob
	var maxLag int64
	var maxLagSeconds string
	g.Eventually(func(g Gomega) migrationv1.Phase {
		cur = get(g, mj)
		if cur.Finished() {
			StopTrying("the migration ended (" + string(cur.Status.Phase) + ") before ReadyForCutover: " + fmt.Sprint(cur.Status.Conditions)).Now()
		}
		if r := cur.Status.Replication; r != nil && r.LagBytes > maxLag {
			maxLag, maxLagSeconds = r.LagBytes, r.LagSeconds
		}
		return cur.Status.Phase
	}).WithTimeout(10 * time.Minute).WithPolling(time.Second).Should(Equal(migrationv1.PhaseReadyForCutover))
	ready := time.Since(created)
	v := cur.Status.Verification
	g.Expect(v).NotTo(BeNil())
	g.Expect(v.Mismatched).To(BeZero(), "%+v", v)
	// The load kept writing through verification: the replication checks
	// while waiting for approval show it.
	g.Eventually(func(g Gomega) string {
		r := get(g, mj).Status.Replication
		g.Expect(r).NotTo(BeNil())
		if r.LagBytes > maxLag {
			maxLag, maxLagSeconds = r.LagBytes, r.LagSeconds
		}
		return r.LagSeconds
	}).WithTimeout(3 * time.Minute).WithPolling(time.Second).ShouldNot(BeEmpty())
	t.Logf("bench: %d rows/s asked, created → ReadyForCutover %s; verification %q (%d re-checks at most per table: %+v); largest lag seen %d bytes (%s s)",
		rate, ready.Round(time.Millisecond), v.Summary, maxRechecks(v), v.Items, maxLag, maxLagSeconds)

	evStats, logStats := events.Stop(), logs.Stop()
	t.Logf("load: live_events %s; live_log (no primary key) %s", evStats, logStats)
	g.Expect(evStats.Errors+logStats.Errors).To(BeZero(), "%s %s", events.FirstError(), logs.FirstError())
	want, err := d.tables(d.server, src)
	g.Expect(err).NotTo(HaveOccurred())

	patch := client.MergeFrom(cur.DeepCopy())
	cur.Spec.Cutover.Approved = true
	cur.Spec.Cutover.WritersStopped = true // the load has stopped
	g.Expect(env.Client.Patch(ctx, cur, patch)).To(Succeed())
	cur = waitDone(g, mj)
	g.Expect(cur.Status.Phase).To(Equal(migrationv1.PhaseSucceeded), "conditions: %+v", cur.Status.Conditions)
	g.Expect(strings.Join(cur.Status.Cutover.Actions, "\n")).To(ContainSubstring("compared exactly"))
	got, err := d.tables(d.server, dst)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(got).To(Equal(want), "after cutover the target equals the source table by table")
	n, err := d.server.SQL(dst, "SELECT count(*) FROM live_events")
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(strings.TrimSpace(n)).To(Equal(strconv.FormatInt(rows+evStats.Inserted-evStats.Deleted, 10)), "no row lost")
	cleanup(g, mj)
}

func maxRechecks(v *migrationv1.Verification) int32 {
	var n int32
	for _, it := range v.Items {
		n = max(n, it.Rechecks)
	}
	return n
}
