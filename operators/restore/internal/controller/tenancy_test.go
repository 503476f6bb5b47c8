package controller_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	rbacv1 "k8s.io/api/rbac/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	backupv1 "cairn.dev/apis/backup/v1"
	restorev1 "cairn.dev/apis/restore/v1"
)

// TestRestoreJobTenancy: a tenant may not make a RestoreJob read another
// namespace's catalog (source.store.backupJob: other/name) without get on
// that BackupJob, nor use credentials they may not get; with get on it,
// the same RestoreJob is admitted.
func TestRestoreJobTenancy(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	startOperator(t, operatorOptions{})
	ns := namespace(t)
	other := namespace(t)
	cfg, err := env.Tenant(ctx, ns, "eve",
		rbacv1.PolicyRule{APIGroups: []string{restorev1.GroupVersion.Group}, Resources: []string{"restorejobs"}, Verbs: []string{"get", "create"}},
		rbacv1.PolicyRule{APIGroups: []string{""}, Resources: []string{"secrets"}, ResourceNames: []string{"scratch-db-credentials", "s3-credentials"}, Verbs: []string{"get"}})
	g.Expect(err).NotTo(HaveOccurred())
	eve, err := client.New(cfg, client.Options{Scheme: env.Scheme})
	g.Expect(err).NotTo(HaveOccurred())

	rj := func(name, catalog string) *restorev1.RestoreJob {
		return restoreJob(ns, name, restorev1.RestoreSource{Store: &restorev1.StoreSource{
			Storage: s3Storage(), BackupJob: catalog, Artifact: "prod/x/orders/a.pgdump.zst"}})
	}
	createErr := func(r *restorev1.RestoreJob) func() string {
		return func() string {
			if err := eve.Create(ctx, r.DeepCopy()); err != nil {
				return err.Error()
			}
			return "admitted"
		}
	}
	g.Eventually(createErr(rj("cross", other+"/orders"))).WithTimeout(30 * time.Second).Should(ContainSubstring(
		fmt.Sprintf(`spec.source.store.backupJob: user "eve" may not get backupjob "orders" in namespace %q`, other)))

	creds := rj("creds", ns+"/orders")
	creds.Spec.Target.CredentialsSecretRef.Name = "orders-db-credentials"
	g.Eventually(createErr(creds)).WithTimeout(30 * time.Second).Should(ContainSubstring(
		fmt.Sprintf(`spec.target.credentialsSecretRef: user "eve" may not get secret "orders-db-credentials" in namespace %q`, ns)))

	// Granted get on the other namespace's BackupJob: admitted.
	_, err = env.Tenant(ctx, other, "eve", rbacv1.PolicyRule{APIGroups: []string{backupv1.GroupVersion.Group},
		Resources: []string{"backupjobs"}, ResourceNames: []string{"orders"}, Verbs: []string{"get"}})
	g.Expect(err).NotTo(HaveOccurred())
	g.Eventually(createErr(rj("cross", other+"/orders"))).WithTimeout(30 * time.Second).Should(Equal("admitted"))
}
