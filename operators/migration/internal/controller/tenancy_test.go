package controller_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"cairn.dev/agent/contract"
	cairnv1 "cairn.dev/apis/meta/v1"
	migrationv1 "cairn.dev/apis/migration/v1"
	"cairn.dev/libs/remote"
	"cairn.dev/libs/testing/testenv"
)

// refused polls create (RBAC takes a moment to apply) until it fails with
// an error containing want.
func refused(g Gomega, c client.Client, mj *migrationv1.MigrationJob, want string) {
	g.Eventually(func() string {
		err := c.Create(context.Background(), mj.DeepCopy())
		if err == nil {
			return "admitted"
		}
		return err.Error()
	}).WithTimeout(30 * time.Second).Should(ContainSubstring(want))
}

// TestMigrationJobTenancy: what a MigrationJob may make the migration
// operator use is checked at admission, against the real API server:
//   - a tenant may not name a Secret they may not get, nor switch one they
//     may not patch;
//   - nobody may switch a Secret without the opt-in label;
//   - spec.image only from the allow-list;
//   - a kubeconfig with an http:// server or a proxy-url is refused.
func TestMigrationJobTenancy(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	startOperator(t)
	ns := namespace(t)

	cfg, err := env.Tenant(ctx, ns, "mallory",
		rbacv1.PolicyRule{APIGroups: []string{migrationv1.GroupVersion.Group}, Resources: []string{"migrationjobs"}, Verbs: []string{"get", "create"}},
		rbacv1.PolicyRule{APIGroups: []string{""}, Resources: []string{"secrets"}, ResourceNames: []string{"source-credentials", "target-credentials", "app-db"}, Verbs: []string{"get"}})
	g.Expect(err).NotTo(HaveOccurred())
	mallory, err := client.New(cfg, client.Options{Scheme: env.Scheme})
	g.Expect(err).NotTo(HaveOccurred())

	steal := migrationJob(ns, "steal")
	steal.Spec.Source.CredentialsSecretRef.Name = "db-admin"
	refused(g, mallory, steal, fmt.Sprintf(`spec.source.credentialsSecretRef: user "mallory" may not get secret "db-admin" in namespace %q`, ns))

	repoint := migrationJob(ns, "repoint")
	repoint.Spec.Cutover.SwitchSecret = &cairnv1.LocalObjectReference{Name: "app-db"}
	refused(g, mallory, repoint, fmt.Sprintf(`spec.cutover.switchSecret: user "mallory" may not patch secret "app-db" in namespace %q`, ns))

	// Her own Secrets: admitted.
	g.Eventually(func() error { return mallory.Create(ctx, migrationJob(ns, "own")) }).WithTimeout(30 * time.Second).Should(Succeed())

	// Nobody, not even the cluster admin, switches an unlabelled Secret.
	g.Expect(env.Client.Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "other-app-db"},
		StringData: map[string]string{"host": "h", "port": "5432", "database": "d", "password": "theirs"}})).To(Succeed())
	unlabelled := migrationJob(ns, "unlabelled")
	unlabelled.Spec.Cutover.SwitchSecret = &cairnv1.LocalObjectReference{Name: "other-app-db"}
	err = env.Client.Create(ctx, unlabelled)
	g.Expect(err).To(HaveOccurred())
	g.Expect(err.Error()).To(ContainSubstring(`spec.cutover.switchSecret: Secret "other-app-db" in namespace "` + ns + `" has no label migration.cairn.dev/switchable="true"`))

	// spec.image: only the allow-list (the operator's agent image).
	img := migrationJob(ns, "image")
	img.Spec.Image = "evil.example/agent:1"
	err = env.Client.Create(ctx, img)
	g.Expect(err).To(HaveOccurred())
	g.Expect(err.Error()).To(ContainSubstring(`spec.image: image "evil.example/agent:1" is not in the operator's allow-list`))

	// Kubeconfigs the operator would refuse are refused at admission.
	kc, err := testenv.Kubeconfig(&rest.Config{Host: "http://10.0.0.1:6443", BearerToken: "x"})
	g.Expect(err).NotTo(HaveOccurred())
	good, err := testenv.Kubeconfig(env.Config)
	g.Expect(err).NotTo(HaveOccurred())
	withProxy := []byte(strings.Replace(string(good), "    server:", "    proxy-url: http://10.0.0.2:3128\n    server:", 1))
	for name, data := range map[string][]byte{"http-kubeconfig": kc, "proxy-kubeconfig": withProxy} {
		g.Expect(env.Client.Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
			Data: map[string][]byte{remote.DefaultKey: data}})).To(Succeed())
		m := migrationJob(ns, name)
		m.Spec.Target.KubeconfigSecretRef = &migrationv1.KubeconfigSecretRef{Name: name}
		m.Spec.Transfer = migrationv1.TransferSpec{Method: migrationv1.TransferStore, Storage: &cairnv1.StorageSpec{
			S3: &cairnv1.S3Storage{Endpoint: "https://s3.example.test", Bucket: "exports",
				CredentialsSecretRef: cairnv1.LocalObjectReference{Name: "s3-credentials"}}}}
		err := env.Client.Create(ctx, m)
		g.Expect(err).To(HaveOccurred(), name)
		g.Expect(err.Error()).To(Or(ContainSubstring("server must be an https:// URL"), ContainSubstring("proxy-url is not allowed")), name)
	}
}

// TestSwitchSecretLabelRemovedAfterAdmissionIsNotWritten: the controller
// checks the opt-in label again right before the switch: a Secret whose
// label went away after admission is not written, and the MigrationJob
// says why.
func TestSwitchSecretLabelRemovedAfterAdmissionIsNotWritten(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	startOperator(t)
	ns := namespace(t)
	mj := migrationJob(ns, "unlabel")
	mj.Spec.Cutover = migrationv1.CutoverSpec{Mode: migrationv1.CutoverAuto, WritersStopped: true, SwitchSecret: &cairnv1.LocalObjectReference{Name: "app-db"}}
	g.Expect(env.Client.Create(ctx, mj)).To(Succeed())

	sec := &corev1.Secret{}
	g.Expect(env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: "app-db"}, sec)).To(Succeed())
	delete(sec.Labels, migrationv1.SwitchableLabel)
	g.Expect(env.Client.Update(ctx, sec)).To(Succeed())

	completeStep(t, env.Client, testenv.WaitForJob(t, env.Client, ns, "unlabel-precheck"), contract.MigrationResult{Tables: 1})
	completeStep(t, env.Client, testenv.WaitForJob(t, env.Client, ns, "unlabel-copy"), contract.MigrationResult{TablesDone: 1, Bytes: 10})
	completeStep(t, env.Client, testenv.WaitForJob(t, env.Client, ns, "unlabel-verify"), contract.MigrationResult{Verification: verification("Checksum",
		[]string{"public.a"}, nil)})
	completeStep(t, env.Client, testenv.WaitForJob(t, env.Client, ns, "unlabel-cutover"), contract.MigrationResult{Verification: verification("Checksum",
		[]string{"public.a"}, nil)})
	g.Eventually(func(g Gomega) {
		c := condition(g, mj, cairnv1.StalledCondition)
		g.Expect(c).NotTo(BeNil())
		g.Expect(c.Reason).To(Equal(migrationv1.SwitchSecretNotSwitchableReason))
		g.Expect(c.Message).To(ContainSubstring(`has no label migration.cairn.dev/switchable="true"`))
	}).WithTimeout(timeout).Should(Succeed())
	g.Expect(env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: "app-db"}, sec)).To(Succeed())
	g.Expect(string(sec.Data["host"])).To(Equal("orders-db.shop.svc"), "never switched")
}
