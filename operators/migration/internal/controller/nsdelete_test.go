package controller_test

import (
	"context"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	cairnv1 "cairn.dev/apis/meta/v1"
	migrationv1 "cairn.dev/apis/migration/v1"
	"cairn.dev/libs/testing/testenv"
	"cairn.dev/operators/migration/internal/controller"
)

// remoteMigration starts a second API server and a MigrationJob in a new
// namespace whose target-side Jobs run there; it returns once the target
// cluster's precheck Job exists and the kubeconfig Secret is held.
func remoteMigration(t *testing.T) (*testenv.Env, string, *migrationv1.MigrationJob) {
	t.Helper()
	g := NewWithT(t)
	ctx := context.Background()
	other, err := testenv.Start(testenv.Options{Scheme: scheme()})
	g.Expect(err).NotTo(HaveOccurred())
	t.Cleanup(func() { _ = other.Stop() })
	startOperator(t)
	ns := namespace(t)
	kc, err := other.Kubeconfig(nil)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(env.Client.Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "dr-cluster"},
		Data: map[string][]byte{"config": kc}})).To(Succeed())
	remoteNS := "orders-dr"
	g.Expect(other.Client.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: remoteNS}})).To(Succeed())
	for _, s := range []struct{ name, k1, k2 string }{{"target-credentials", "username", "password"}, {"s3-credentials", "accessKeyID", "secretAccessKey"}} {
		g.Expect(other.Secret(ctx, remoteNS, s.name, s.k1, s.k2)).To(Succeed())
	}
	mj := migrationJob(ns, "cross")
	mj.Spec.Target.KubeconfigSecretRef = &migrationv1.KubeconfigSecretRef{Name: "dr-cluster", Key: "config"}
	mj.Spec.Target.Namespace = remoteNS
	mj.Spec.Transfer = migrationv1.TransferSpec{Method: migrationv1.TransferStore, Storage: &cairnv1.StorageSpec{S3: &cairnv1.S3Storage{
		Endpoint: "s3.eu-central-1.amazonaws.com", Bucket: "cairn-migrations", Prefix: "orders",
		CredentialsSecretRef: cairnv1.LocalObjectReference{Name: "s3-credentials"}}}}
	g.Expect(env.Client.Create(ctx, mj)).To(Succeed())
	testenv.WaitForJob(t, other.Client, remoteNS, "cross-precheck-tgt")
	g.Eventually(func(g Gomega) {
		sec := &corev1.Secret{}
		g.Expect(env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: "dr-cluster"}, sec)).To(Succeed())
		g.Expect(sec.Finalizers).To(ContainElement(controller.KubeconfigFinalizer))
	}).WithTimeout(timeout).Should(Succeed())
	return other, remoteNS, mj
}

// sweep deletes namespace ns as `kubectl delete namespace` does, waits
// until it refuses new objects, and deletes the kubeconfig Secret and the
// MigrationJob as the namespace controller's sweep would (there is none
// here).
func sweep(t *testing.T, ns string, mj *migrationv1.MigrationJob) {
	t.Helper()
	g := NewWithT(t)
	ctx := context.Background()
	env.TerminateNamespace(t, ns)
	g.Expect(env.Client.Delete(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "dr-cluster"}})).To(Succeed())
	g.Expect(env.Client.Delete(ctx, current(g, mj))).To(Succeed())
}

// A MigrationJob whose target-side Jobs run in another cluster, in a
// namespace being deleted (issue 30): its kubeconfig Secret is kept by the
// operator's finalizer while the namespace is swept, so the finalizer still
// reaches the target cluster and deletes the Jobs there; then the
// MigrationJob and the Secret go. Without the hold the Secret went in the
// sweep and the target cluster's Jobs stayed (cleanup failed until the
// deadline). The finalizer writes pass the platform's admission policy.
func TestNamespaceDeletionDeletesTheTargetClustersJobs(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	other, remoteNS, mj := remoteMigration(t)
	sweep(t, mj.Namespace, mj)
	g.Eventually(testenv.Gone(env.Client, mj)).WithTimeout(timeout).Should(BeTrue())
	g.Expect(jobNames(other.Client, remoteNS)(g)).To(BeEmpty(), "the target cluster's Jobs are left")
	g.Eventually(func() bool {
		return apierrors.IsNotFound(env.Client.Get(ctx, client.ObjectKey{Namespace: mj.Namespace, Name: "dr-cluster"}, &corev1.Secret{}))
	}).WithTimeout(timeout).Should(BeTrue(), "the kubeconfig Secret is still held")
}

// The target cluster is down when the namespace is deleted: the
// MigrationJob waits for it until the cleanup deadline (the suite's is a
// minute), then goes, the kubeconfig Secret with it, and a Warning Event
// on the Namespace (Events in it are refused) says which Jobs were left in
// which namespace of the target cluster.
func TestNamespaceDeletionTargetClusterDownDeadline(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	other, remoteNS, mj := remoteMigration(t)
	uid := current(g, mj).UID
	g.Expect(other.Stop()).To(Succeed())
	sweep(t, mj.Namespace, mj)
	g.Consistently(func() error { return env.Client.Get(ctx, client.ObjectKeyFromObject(mj), &migrationv1.MigrationJob{}) }).
		WithTimeout(5 * time.Second).Should(Succeed())
	g.Eventually(testenv.Gone(env.Client, mj)).WithTimeout(2 * time.Minute).Should(BeTrue())
	g.Eventually(func() bool {
		sec := &corev1.Secret{}
		err := env.Client.Get(ctx, client.ObjectKey{Namespace: mj.Namespace, Name: "dr-cluster"}, sec)
		return apierrors.IsNotFound(err) || !controllerutil.ContainsFinalizer(sec, controller.KubeconfigFinalizer)
	}).WithTimeout(timeout).Should(BeTrue(), "the kubeconfig Secret is still held")
	g.Eventually(func(g Gomega) {
		list := &eventsv1.EventList{}
		g.Expect(env.Client.List(ctx, list, client.InNamespace(metav1.NamespaceDefault))).To(Succeed())
		var notes []string
		for _, e := range list.Items {
			if e.Regarding.Kind == "Namespace" && e.Regarding.Name == mj.Namespace && e.Reason == "CleanupDeadlineExceeded" {
				notes = append(notes, e.Note)
			}
		}
		g.Expect(notes).To(ContainElement(And(
			ContainSubstring("MigrationJob "+mj.Namespace+"/cross"),
			ContainSubstring(string(uid)+" in namespace "+remoteNS+" of the target cluster"))))
	}).WithTimeout(timeout).Should(Succeed())
}
