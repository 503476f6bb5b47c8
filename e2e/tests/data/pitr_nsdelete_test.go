package data_test

import (
	"context"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"cairn.dev/agent/contract"
	backupv1 "cairn.dev/apis/backup/v1"
	"cairn.dev/e2e/fixtures"
)

// Issue 27: a namespace holding a PostgreSQL BackupJob with point-in-time
// on is deleted (deletionPolicy Retain: the slot is released whatever the
// policy). The database server lives outside the namespace. The archiver's
// replication slot is on the server; the namespace refuses new Jobs, so
// the release runs in the operator's namespace with the database keys
// handed over (the tenant's Secret kept by the operator's finalizer until
// then, no store): the namespace is gone within the deadline, the slot
// with it, and the handed-over keys are removed. Before, the slot stayed
// on the source, keeping WAL, with a Warning Event.
func TestNamespaceDeletionReleasesThePostgresSlot(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	e := postgres()
	ns := namespace(t, e)
	src := dbName(ns, "shop")
	_, err := e.sql.SQL("postgres", "CREATE DATABASE "+src)
	g.Expect(err).NotTo(HaveOccurred())
	slot := contract.SlotName(ns + "/shop")
	slots := func() string {
		out, err := e.sql.SQL("postgres", "SELECT count(*) FROM pg_replication_slots WHERE slot_name = '"+slot+"'")
		g.Expect(err).NotTo(HaveOccurred())
		return strings.TrimSpace(out)
	}
	t.Cleanup(func() {
		// Passed or not, no slot of this test stays on the shared server.
		_, _ = e.sql.SQL("postgres", "SELECT pg_drop_replication_slot(slot_name) FROM pg_replication_slots WHERE slot_name = '"+slot+"' AND NOT active")
		_, _ = e.sql.SQL("postgres", "DROP DATABASE IF EXISTS "+src+" WITH (FORCE)")
	})

	bj := backupJob(ns, "shop", e, src, fixtures.Yearly, pvcStorage(t, ns, "backups"))
	bj.Spec.DeletionPolicy = backupv1.DeletionPolicyRetain
	bj.Spec.PointInTime = &backupv1.PointInTimeSpec{MaxSegmentAge: &metav1.Duration{Duration: 10 * time.Second}}
	g.Expect(env.Client.Create(ctx, bj)).To(Succeed())
	g.Eventually(func(g Gomega) {
		g.Expect(slots()).To(Equal("1"), "the archiver's slot %s on the server", slot)
		sec := &corev1.Secret{}
		g.Expect(env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: "db"}, sec)).To(Succeed())
		g.Expect(sec.Finalizers).To(ContainElement("backup.cairn.dev/artifact-delete"), "the database Secret is held")
	}).WithTimeout(3 * time.Minute).WithPolling(time.Second).Should(Succeed())

	start := time.Now()
	g.Expect(env.Client.Delete(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}})).To(Succeed())
	g.Eventually(func() bool {
		return apierrors.IsNotFound(env.Client.Get(ctx, client.ObjectKey{Name: ns}, &corev1.Namespace{}))
	}).WithTimeout(3*time.Minute).WithPolling(time.Second).Should(BeTrue(), "the namespace is gone")
	t.Logf("namespace %s gone %s after the delete", ns, time.Since(start).Round(time.Second))
	g.Expect(slots()).To(Equal("0"), "the slot %s is still on the server", slot)
	sec := &corev1.Secret{}
	g.Expect(env.Client.Get(ctx, client.ObjectKey{Namespace: "cairn-system", Name: "cairn-backup-delete-credentials"}, sec)).To(Succeed())
	for k := range sec.Data {
		g.Expect(k).NotTo(ContainSubstring("release-slot"), "the release Job's keys are still handed over")
	}
}
