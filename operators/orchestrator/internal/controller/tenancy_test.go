package controller_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	rbacv1 "k8s.io/api/rbac/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	cairnv1 "cairn.dev/apis/meta/v1"
	migrationv1 "cairn.dev/apis/migration/v1"
	platformv1 "cairn.dev/apis/platform/v1"
)

// TestProtectionPlanTenancy: a plan's children run with the child
// operators' identities, so the plan's requester must be allowed to use
// every Secret the plan names — the scratch database's and the migration
// template's included; an update adding one is refused too.
func TestProtectionPlanTenancy(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	startOperator(t, time.Now())
	ns := namespace(t)
	cfg, err := env.Tenant(ctx, ns, "trudy",
		rbacv1.PolicyRule{APIGroups: []string{platformv1.GroupVersion.Group}, Resources: []string{"protectionplans"}, Verbs: []string{"get", "create", "update"}},
		rbacv1.PolicyRule{APIGroups: []string{""}, Resources: []string{"secrets"}, ResourceNames: []string{"orders-db-credentials", "scratch-credentials"}, Verbs: []string{"get"}},
		rbacv1.PolicyRule{APIGroups: []string{""}, Resources: []string{"persistentvolumeclaims"}, ResourceNames: []string{"backups"}, Verbs: []string{"get"}})
	g.Expect(err).NotTo(HaveOccurred())
	trudy, err := client.New(cfg, client.Options{Scheme: env.Scheme})
	g.Expect(err).NotTo(HaveOccurred())
	createErr := func(p *platformv1.ProtectionPlan) func() string {
		return func() string {
			if err := trudy.Create(ctx, p.DeepCopy()); err != nil {
				return err.Error()
			}
			return "admitted"
		}
	}

	scratch := plan(ns, "scratch")
	scratch.Spec.Verification.RestoreInto.CredentialsSecretRef.Name = "db-admin"
	g.Eventually(createErr(scratch)).WithTimeout(30 * time.Second).Should(ContainSubstring(
		fmt.Sprintf(`spec.verification.restoreInto.credentialsSecretRef: user "trudy" may not get secret "db-admin" in namespace %q`, ns)))

	claim := plan(ns, "claim")
	claim.Spec.Backup.Storage.PVC.ClaimName = "finance-archive"
	g.Eventually(createErr(claim)).WithTimeout(30 * time.Second).Should(ContainSubstring(
		fmt.Sprintf(`spec.backup.storage.pvc.claimName: user "trudy" may not get persistentvolumeclaim "finance-archive" in namespace %q`, ns)))

	own := plan(ns, "own")
	g.Eventually(createErr(own)).WithTimeout(30 * time.Second).Should(Equal("admitted"))

	// An update adding a migration template with a kubeconfig she may not
	// read is refused.
	g.Eventually(func() string {
		cur := current(g, own)
		cur.Spec.Migration = &platformv1.MigrationSpec{Template: migrationv1.MigrationJobSpec{
			Source: cur.Spec.Database,
			Target: migrationv1.TargetDatabase{DatabaseRef: cairnv1.DatabaseRef{Engine: cairnv1.PostgresEngine, Host: "new-db.shop.svc", Database: "orders",
				CredentialsSecretRef: cairnv1.LocalObjectReference{Name: "orders-db-credentials"}},
				KubeconfigSecretRef: &migrationv1.KubeconfigSecretRef{Name: "prod-cluster-kubeconfig"}},
			Transfer: migrationv1.TransferSpec{Method: migrationv1.TransferStore, Storage: &cairnv1.StorageSpec{S3: &cairnv1.S3Storage{
				Endpoint: "https://s3.example.test", Bucket: "exports", CredentialsSecretRef: cairnv1.LocalObjectReference{Name: "scratch-credentials"}}}},
		}}
		if err := trudy.Update(ctx, cur); err != nil {
			return err.Error()
		}
		return "admitted"
	}).WithTimeout(30 * time.Second).Should(ContainSubstring(
		fmt.Sprintf(`spec.migration.template.target.kubeconfigSecretRef: user "trudy" may not get secret "prod-cluster-kubeconfig" in namespace %q`, ns)))
}
