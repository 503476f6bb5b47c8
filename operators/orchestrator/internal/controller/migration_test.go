package controller_test

import (
	"context"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	cairnv1 "cairn.dev/apis/meta/v1"
	migrationv1 "cairn.dev/apis/migration/v1"
	platformv1 "cairn.dev/apis/platform/v1"
	"cairn.dev/libs/testing/testenv"
)

// migrationTemplate migrates the plan's database into another server.
func migrationTemplate(start bool) *platformv1.MigrationSpec {
	return &platformv1.MigrationSpec{
		Start: start,
		Template: migrationv1.MigrationJobSpec{
			Source: protectedDB(),
			Target: migrationv1.TargetDatabase{DatabaseRef: cairnv1.DatabaseRef{
				Engine: cairnv1.PostgresEngine, Host: "new-db.shop.svc", Database: "orders",
				CredentialsSecretRef: cairnv1.LocalObjectReference{Name: "new-db-credentials"},
			}},
		},
	}
}

func migrationJobKey(p *platformv1.ProtectionPlan) client.ObjectKey {
	return client.ObjectKey{Namespace: p.Namespace, Name: p.Name + platformv1.MigrationJobSuffix}
}

// migrationJobNames lists the MigrationJobs in ns.
func migrationJobNames(g Gomega, ns string) []string {
	list := &migrationv1.MigrationJobList{}
	g.Expect(env.Client.List(context.Background(), list, client.InNamespace(ns))).To(Succeed())
	var names []string
	for _, m := range list.Items {
		names = append(names, m.Name)
	}
	return names
}

// The plan's MigrationJob is created only once spec.migration.start is
// true, exactly once, owned by the plan; an edit of it is reverted to the
// template; its phase and conditions are mirrored into status.migration
// without touching BackupHealthy or Ready; start:false afterwards does not
// delete it; deleting the plan does.
func TestMigrationJobCreatedOnStartDriftRevertedAndMirrored(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	startOperator(t, time.Now())
	ns := namespace(t)
	p := plan(ns, "orders")
	p.Spec.Migration = migrationTemplate(false)
	g.Expect(env.Client.Create(ctx, p)).To(Succeed())

	// Not before start: the BackupJob exists, the MigrationJob does not.
	bj := backupJobOf(t, p)
	g.Eventually(condition(p, platformv1.BackupHealthyCondition)).WithTimeout(timeout).Should(HavePrefix("Unknown/"))
	g.Consistently(func(g Gomega) []string { return migrationJobNames(g, ns) }).WithTimeout(2 * time.Second).Should(BeEmpty())
	g.Expect(current(g, p).Status.Migration).To(BeNil())

	// start: true creates it, owned and labelled.
	cur := updatePlan(g, p, func(cur *platformv1.ProtectionPlan) {
		cur.Spec.Migration.Start = true
	})
	mj := &migrationv1.MigrationJob{}
	g.Eventually(func() error { return env.Client.Get(ctx, migrationJobKey(p), mj) }).WithTimeout(timeout).Should(Succeed())
	g.Expect(metav1.IsControlledBy(mj, current(g, p))).To(BeTrue())
	g.Expect(mj.Labels).To(HaveKeyWithValue(platformv1.PlanLabel, "orders"))
	g.Expect(mj.Spec.Source).To(Equal(current(g, p).Spec.Database))
	g.Expect(mj.Spec.Target.Host).To(Equal("new-db.shop.svc"))
	g.Expect(mj.Spec.Cutover.Approved).To(BeFalse())
	uid := mj.UID

	// Drift: approving on the MigrationJob itself is reverted to the template.
	g.Eventually(func() error {
		m := &migrationv1.MigrationJob{}
		if err := env.Client.Get(ctx, migrationJobKey(p), m); err != nil {
			return err
		}
		m.Spec.Cutover.Approved = true
		return env.Client.Update(ctx, m)
	}).WithTimeout(timeout).Should(Succeed())
	g.Eventually(func(g Gomega) bool { return get(g, mj).Spec.Cutover.Approved }).WithTimeout(timeout).Should(BeFalse())
	// Approving through the plan reaches it.
	cur = updatePlan(g, p, func(cur *platformv1.ProtectionPlan) {
		cur.Spec.Migration.Template.Cutover.Approved = true
	})
	g.Eventually(func(g Gomega) bool { return get(g, mj).Spec.Cutover.Approved }).WithTimeout(timeout).Should(BeTrue())

	// Status mirrors the child's phase and conditions, and the child's
	// Ready does not count towards the plan's Ready or BackupHealthy.
	g.Eventually(func() error {
		m := &migrationv1.MigrationJob{}
		if err := env.Client.Get(ctx, migrationJobKey(p), m); err != nil {
			return err
		}
		m.Status.Phase = migrationv1.PhaseCopying
		m.Status.ObservedGeneration = m.Generation
		m.Status.Conditions = []metav1.Condition{{Type: cairnv1.ReadyCondition, Status: metav1.ConditionFalse,
			Reason: "Copying", Message: "copying 3 tables", ObservedGeneration: m.Generation, LastTransitionTime: metav1.Now()}}
		return env.Client.Status().Update(ctx, m)
	}).WithTimeout(timeout).Should(Succeed())
	g.Eventually(func(g Gomega) migrationv1.Phase {
		mr := current(g, p).Status.Migration
		g.Expect(mr).NotTo(BeNil())
		return mr.Phase
	}).WithTimeout(timeout).Should(Equal(migrationv1.PhaseCopying))
	mr := current(g, p).Status.Migration
	g.Expect(mr.Name).To(Equal("orders-migrate"))
	g.Expect(mr.Conditions).To(HaveLen(1))
	g.Expect(mr.Conditions[0].Reason).To(Equal("Copying"))
	g.Expect(condition(p, platformv1.BackupHealthyCondition)(g)).To(HavePrefix("Unknown/"))
	g.Expect(condition(p, cairnv1.ReadyCondition)(g)).NotTo(ContainSubstring("Copying"))

	// start: false never deletes the running migration.
	cur = updatePlan(g, p, func(cur *platformv1.ProtectionPlan) {
		cur.Spec.Migration.Start = false
	})
	g.Eventually(func(g Gomega) int64 { return current(g, p).Status.ObservedGeneration }).WithTimeout(timeout).Should(Equal(cur.Generation))
	g.Consistently(func(g Gomega) []string { return migrationJobNames(g, ns) }).WithTimeout(2 * time.Second).Should(Equal([]string{"orders-migrate"}))
	g.Expect(get(g, mj).UID).To(Equal(uid))
	g.Expect(current(g, p).Status.Migration.Phase).To(Equal(migrationv1.PhaseCopying))

	// Deleting the plan deletes it with the other children.
	g.Expect(env.Client.Delete(ctx, current(g, p))).To(Succeed())
	g.Eventually(testenv.Gone(env.Client, mj)).WithTimeout(timeout).Should(BeTrue())
	g.Eventually(testenv.Gone(env.Client, bj)).WithTimeout(timeout).Should(BeTrue())
	g.Eventually(testenv.Gone(env.Client, p)).WithTimeout(timeout).Should(BeTrue())
}

// A MigrationJob of the plan's name that the plan did not create is never
// adopted or changed: the plan is Stalled with NotControlled.
func TestForeignMigrationJobRefused(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	startOperator(t, time.Now())
	ns := namespace(t)
	foreignSpec := migrationTemplate(true).Template
	foreignSpec.Target.Host = "elsewhere.svc"
	foreign := &migrationv1.MigrationJob{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "orders-migrate"},
		Spec:       foreignSpec,
	}
	g.Expect(env.Client.Create(ctx, foreign)).To(Succeed())
	p := plan(ns, "orders")
	p.Spec.Migration = migrationTemplate(true)
	g.Expect(env.Client.Create(ctx, p)).To(Succeed())

	g.Eventually(condition(p, cairnv1.StalledCondition)).WithTimeout(timeout).Should(Equal("True/" + cairnv1.NotControlledReason))
	g.Eventually(eventReasons(p)).WithTimeout(timeout).Should(ContainElement("Warning/" + cairnv1.NotControlledReason))
	got := get(g, foreign)
	g.Expect(got.OwnerReferences).To(BeEmpty())
	g.Expect(got.Labels).NotTo(HaveKey(platformv1.PlanLabel))
	g.Expect(got.Spec.Target.Host).To(Equal("elsewhere.svc"))
	g.Expect(current(g, p).Status.Migration).To(BeNil())
}

// Admission refuses a migration template whose source is not the plan's
// database.
func TestMigrationSourceMustBeThePlansDatabase(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	startOperator(t, time.Now())
	ns := namespace(t)
	p := plan(ns, "orders")
	p.Spec.Migration = migrationTemplate(true)
	p.Spec.Migration.Template.Source.Database = "customers"
	err := env.Client.Create(ctx, p)
	g.Expect(err).To(HaveOccurred())
	g.Expect(err.Error()).To(ContainSubstring("migration.template.source"))
	g.Expect(err.Error()).To(ContainSubstring("plan's database"))
}
