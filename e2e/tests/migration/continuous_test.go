package migration_test

import (
	"context"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	cairnv1 "cairn.dev/apis/meta/v1"
	migrationv1 "cairn.dev/apis/migration/v1"
)

// A Continuous PostgreSQL migration with a Manual cutover: the initial copy
// and PostgreSQL's logical replication (publication and slot on the source,
// subscription on the target, named in status.replication with the lag);
// rows written to the source while it waits for approval reach the target;
// once approved (writers declared stopped), replication-stop waits until
// the target applied everything written before it and stops replication. The
// migration succeeds, the target equals the source including the new rows
// (the test's own check), and the source has neither the slot nor the
// publication any more (nor the target the subscription).
func TestPostgresContinuousMigration(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	d := engine(cairnv1.PostgresEngine)
	mj, _, dst := setup(t, g, d, 1000, migrationv1.TransferSpec{}, migrationv1.CutoverSpec{Mode: migrationv1.CutoverManual})
	mj.Spec.Mode = migrationv1.ModeContinuous
	src := mj.Spec.Source.Database
	g.Expect(env.Client.Create(ctx, mj)).To(Succeed())

	// ReadyForCutover is stored (with the first replication check's Job)
	// before the pass that says it waits for approval.
	var cur *migrationv1.MigrationJob
	g.Eventually(func(g Gomega) string {
		cur = get(g, mj)
		if cur.Finished() {
			StopTrying("the migration ended (" + string(cur.Status.Phase) + ") before ReadyForCutover").Now()
		}
		reason := ""
		if c := apimeta.FindStatusCondition(cur.Status.Conditions, migrationv1.CutOverCondition); c != nil && c.Status == metav1.ConditionFalse {
			reason = c.Reason
		}
		return string(cur.Status.Phase) + " " + reason
	}).WithTimeout(5 * time.Minute).WithPolling(time.Second).Should(Equal(string(migrationv1.PhaseReadyForCutover) + " " + migrationv1.AwaitingApprovalReason))
	rep := cur.Status.Replication
	g.Expect(rep).NotTo(BeNil())
	g.Expect(rep.Publication).NotTo(BeEmpty())
	g.Expect(rep.Subscription).NotTo(BeEmpty())
	g.Expect(rep.Slot).NotTo(BeEmpty())
	g.Expect(rep.LastCheckTime).NotTo(BeNil())
	g.Expect(cur.Status.Verification).NotTo(BeNil())
	g.Expect(cur.Status.Verification.Mismatched).To(BeZero(), "%+v", cur.Status.Verification)
	count := func(db, sql string) string {
		out, err := d.server.SQL(db, sql)
		g.Expect(err).NotTo(HaveOccurred())
		return strings.TrimSpace(out)
	}
	g.Expect(count(src, "SELECT count(*) FROM pg_replication_slots WHERE slot_name = '"+rep.Slot+"'")).To(Equal("1"))
	g.Expect(count(src, "SELECT count(*) FROM pg_publication WHERE pubname = '"+rep.Publication+"'")).To(Equal("1"))
	g.Expect(count(dst, "SELECT count(*) FROM pg_subscription WHERE subname = '"+rep.Subscription+"'")).To(Equal("1"))
	t.Logf("replicating: lag %d bytes, retained WAL %d bytes, %d/%d tables synced",
		rep.LagBytes, rep.RetainedWALBytes, rep.SyncedTables, rep.Tables)

	// Writes to the source while the migration waits for approval.
	_, err := d.server.SQL(src, `
INSERT INTO orders SELECT g, 1 + g % 100, 12.34, 'new', timestamptz '2026-06-01 00:00:00+00' + g * interval '1 second' FROM generate_series(1001, 1050) g;
INSERT INTO order_items SELECT o, 1, 'SKU-NEW', 3 FROM generate_series(1001, 1050) o;
UPDATE customers SET email = 'changed@example.com' WHERE id = 42;
DELETE FROM order_items WHERE order_id = 5 AND line = 2;`)
	g.Expect(err).NotTo(HaveOccurred())
	want, err := d.tables(d.server, src)
	g.Expect(err).NotTo(HaveOccurred())

	patch := client.MergeFrom(cur.DeepCopy())
	cur.Spec.Cutover.Approved = true
	cur.Spec.Cutover.WritersStopped = true // the test wrote its last rows above
	g.Expect(env.Client.Patch(ctx, cur, patch)).To(Succeed())
	cur = waitDone(g, mj)
	g.Expect(cur.Status.Phase).To(Equal(migrationv1.PhaseSucceeded), "conditions: %+v", cur.Status.Conditions)
	g.Expect(cur.Status.Replication.Stopped).To(BeTrue())
	got, err := d.tables(d.server, dst)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(got).To(Equal(want), "the target has the rows written during replication")
	g.Expect(count(src, "SELECT count(*) FROM pg_replication_slots WHERE slot_name = '"+rep.Slot+"'")).To(Equal("0"))
	g.Expect(count(src, "SELECT count(*) FROM pg_publication WHERE pubname = '"+rep.Publication+"'")).To(Equal("0"))
	g.Expect(count(dst, "SELECT count(*) FROM pg_subscription WHERE subname = '"+rep.Subscription+"'")).To(Equal("0"))
	t.Logf("cut over after %d replication check(s): %s", cur.Status.Replication.Checks, strings.Join(cur.Status.Cutover.Actions, "; "))
	cleanup(g, mj)
}
