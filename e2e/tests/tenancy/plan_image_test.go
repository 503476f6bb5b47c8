package tenancy_test

import (
	"context"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/util/retry"
	"sigs.k8s.io/controller-runtime/pkg/client"

	cairnv1 "cairn.dev/apis/meta/v1"
	migrationv1 "cairn.dev/apis/migration/v1"
	platformv1 "cairn.dev/apis/platform/v1"
	"cairn.dev/e2e/fixtures"
)

// migrationPlan is a ProtectionPlan with a migration template (not
// started) running image; "" leaves spec.image to the operator's agent.
func migrationPlan(ns, name, image string) *platformv1.ProtectionPlan {
	db := cairnv1.DatabaseRef{Engine: cairnv1.PostgresEngine, Host: "orders-db.shop.svc", Database: "orders",
		CredentialsSecretRef: cairnv1.LocalObjectReference{Name: "orders-db"}}
	every := int32(1)
	return &platformv1.ProtectionPlan{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: platformv1.ProtectionPlanSpec{
			Database: db,
			Backup: platformv1.BackupTemplate{Schedule: "0 2 * * *",
				Storage: cairnv1.StorageSpec{PVC: &cairnv1.PVCStorage{ClaimName: "backups"}}},
			Verification: platformv1.VerificationSpec{EveryNBackups: &every, RestoreInto: platformv1.ScratchDatabase{
				Host: "scratch-db.verify.svc", Database: "orders_verify",
				CredentialsSecretRef: cairnv1.LocalObjectReference{Name: "scratch"}}},
			Objectives: platformv1.Objectives{RPO: metav1.Duration{Duration: 26 * time.Hour}},
			Migration: &platformv1.MigrationSpec{Template: migrationv1.MigrationJobSpec{
				Source: db,
				Target: migrationv1.TargetDatabase{DatabaseRef: cairnv1.DatabaseRef{Engine: cairnv1.PostgresEngine,
					Host: "orders-db-v16.shop.svc", Database: "orders", CredentialsSecretRef: cairnv1.LocalObjectReference{Name: "orders-db-v16"}}},
				Image: image,
			}},
		},
	}
}

// TestPlanMigrationTemplateImageIsCheckedAtAdmission: a ProtectionPlan's
// migration template naming an image outside the migration operator's
// allow-list is refused when the plan is created or updated — the
// orchestrator has the migration operator's admission judge the
// MigrationJob it would make (a dry run) — not only later, when the plan
// creates the MigrationJob; the same for an update adding the template.
// The same plan without spec.image is admitted, and the dry run leaves no
// MigrationJob behind.
func TestPlanMigrationTemplateImageIsCheckedAtAdmission(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	ns := fixtures.Namespace(t, env.Client, "plan-image-")

	bad := migrationPlan(ns, "evil", "registry.example/evil:latest")
	g.Eventually(func() string {
		err := env.Client.Create(ctx, bad.DeepCopy())
		if err == nil {
			return "admitted"
		}
		return err.Error()
	}).WithTimeout(timeout).WithPolling(500 * time.Millisecond).Should(
		And(ContainSubstring("spec.migration.template"), ContainSubstring("spec.image"), ContainSubstring("registry.example/evil:latest")))

	good := migrationPlan(ns, "orders", "")
	g.Expect(env.Client.Create(ctx, good)).To(Succeed())
	mjs := &migrationv1.MigrationJobList{}
	g.Expect(env.Client.List(ctx, mjs)).To(Succeed())
	for _, mj := range mjs.Items {
		g.Expect(mj.Namespace).NotTo(Equal(ns), "the dry run created MigrationJob %s", mj.Name)
	}

	// A plan without a migration, given one by an update: the same check.
	// (A template's image cannot change once set: the MigrationJob spec's
	// own immutability rules apply to the template in the CRD.)
	plain := migrationPlan(ns, "plain", "")
	plain.Spec.Migration = nil
	g.Expect(env.Client.Create(ctx, plain)).To(Succeed())
	// The orchestrator writes the new plan too (finalizer, status): read
	// it again on a conflict.
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		upd := &platformv1.ProtectionPlan{}
		if err := env.Client.Get(ctx, client.ObjectKeyFromObject(plain), upd); err != nil {
			return err
		}
		upd.Spec.Migration = migrationPlan(ns, "plain", "registry.example/evil:latest").Spec.Migration
		return env.Client.Update(ctx, upd)
	})
	g.Expect(err).To(HaveOccurred(), "an update adding a template with an image outside the allow-list")
	g.Expect(strings.Contains(err.Error(), "spec.migration.template") && strings.Contains(err.Error(), "spec.image")).To(BeTrue(), "%v", err)
}
