package controller_test

import (
	"context"
	"testing"

	. "github.com/onsi/gomega"
	"k8s.io/apimachinery/pkg/api/resource"
	"sigs.k8s.io/controller-runtime/pkg/client"

	cairnv1 "cairn.dev/apis/meta/v1"
	migrationv1 "cairn.dev/apis/migration/v1"
	"cairn.dev/libs/testing/testenv"
)

// refusals are specs the API server refuses, with a substring of the answer
// (field paths, which CEL and the webhook both name).
var refusals = []struct {
	name   string
	mutate func(*migrationv1.MigrationJob)
	want   string
}{
	{"different engines", func(m *migrationv1.MigrationJob) { m.Spec.Target.Engine = cairnv1.MySQLEngine }, "must be the source's engine"},
	{"the source itself", func(m *migrationv1.MigrationJob) { m.Spec.Target.Host = "orders-db.shop.svc" }, "is the source database"},
	{"the source itself, default port", func(m *migrationv1.MigrationJob) {
		m.Spec.Target.Host, m.Spec.Source.Port = "ORDERS-DB.shop.svc", 0
	}, "is the source database"},
	{"bad include pattern", func(m *migrationv1.MigrationJob) { m.Spec.Objects.Include = []string{"public.orders;drop"} }, "spec.objects.include[0]"},
	{"bad exclude pattern", func(m *migrationv1.MigrationJob) { m.Spec.Objects.Exclude = []string{"a.b.c"} }, "spec.objects.exclude[0]"},
	{"continuous mysql", func(m *migrationv1.MigrationJob) {
		m.Spec.Source.Engine, m.Spec.Target.Engine, m.Spec.Source.Port = cairnv1.MySQLEngine, cairnv1.MySQLEngine, 3306
		m.Spec.Mode = migrationv1.ModeContinuous
	}, "Continuous needs postgres"},
	{"store without storage", func(m *migrationv1.MigrationJob) { m.Spec.Transfer.Method = migrationv1.TransferStore }, "transfer.storage"},
	{"replication without continuous", func(m *migrationv1.MigrationJob) {
		q := resource.MustParse("1Gi")
		m.Spec.Replication = &migrationv1.ReplicationSpec{MaxRetainedWAL: &q}
	}, "only with mode Continuous"},
	{"namespace of a local target", func(m *migrationv1.MigrationJob) { m.Spec.Target.Namespace = "elsewhere" }, "only with kubeconfigSecretRef"},
	{"name too long", func(m *migrationv1.MigrationJob) { m.Name = "a-name-that-is-far-too-long-for-the-step-jobs-names-x" }, "metadata.name"},
}

// Admission refuses what cannot be migrated — through the webhook with the
// operator running, and through the CRD's CEL rules alone with no webhook
// installed — and keeps the spec immutable except spec.cutover.approved.
func TestAdmission(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	startOperator(t)
	ns := namespace(t)
	check := func(how string) {
		for _, r := range refusals {
			mj := migrationJob(ns, "bad")
			r.mutate(mj)
			err := env.Client.Create(ctx, mj, client.DryRunAll)
			g.Expect(err).To(HaveOccurred(), "%s: %s accepted", how, r.name)
			g.Expect(err.Error()).To(ContainSubstring(r.want), "%s: %s", how, r.name)
		}
	}
	check("with the webhook")

	mj := migrationJob(ns, "immutable")
	g.Expect(env.Client.Create(ctx, mj)).To(Succeed())
	for what, mutate := range map[string]func(*migrationv1.MigrationJob){
		"spec.target":              func(m *migrationv1.MigrationJob) { m.Spec.Target.Host = "elsewhere.shop.svc" },
		"spec.verify":              func(m *migrationv1.MigrationJob) { m.Spec.Verify = migrationv1.VerifyNone },
		"cutover":                  func(m *migrationv1.MigrationJob) { m.Spec.Cutover.SourceReadOnly = true },
		"spec is immutable except": func(m *migrationv1.MigrationJob) { m.Spec.Objects = nil },
		"cutover: only approved and writersStopped may": func(m *migrationv1.MigrationJob) { m.Spec.Cutover.Mode = migrationv1.CutoverAuto },
	} {
		// Retried while the answer is a conflict with the operator's status write.
		g.Eventually(func() string {
			cur := &migrationv1.MigrationJob{}
			if err := env.Client.Get(ctx, client.ObjectKeyFromObject(mj), cur); err != nil {
				return err.Error()
			}
			mutate(cur)
			err := env.Client.Update(ctx, cur)
			if err == nil {
				return "accepted"
			}
			return err.Error()
		}).WithTimeout(timeout).Should(ContainSubstring(what))
	}
	approve(t, mj)
	g.Expect(current(g, mj).Spec.Cutover.Approved).To(BeTrue())

	hooks := testenv.TakeWebhooks(t, env.Client)
	t.Cleanup(func() {
		for _, h := range hooks {
			if err := env.Client.Create(context.Background(), h); err != nil {
				t.Errorf("reinstalling webhook configuration %s: %v", h.GetName(), err)
			}
		}
	})
	check("CEL alone")
}
