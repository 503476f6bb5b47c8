package controller_test

import (
	"context"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	backupv1 "cairn.dev/apis/backup/v1"
	cairnv1 "cairn.dev/apis/meta/v1"
	"cairn.dev/libs/testing/testenv"
	"cairn.dev/operators/backup/internal/controller"
)

// operatorNamespace is where the operator under test runs (its Lease):
// artifact deletes of namespaces being deleted run there.
const operatorNamespace = testenv.LeaderElectionNamespace

// deleteCredentials ensures the Secret the platform ships empty in the
// operator's namespace and returns its key.
func deleteCredentials(t *testing.T) client.ObjectKey {
	t.Helper()
	sec := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: operatorNamespace, Name: controller.DeleteCredentialsSecret}}
	if err := env.Client.Create(context.Background(), sec); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
	return client.ObjectKeyFromObject(sec)
}

// jobElsewhere is the artifact delete Job for namespace ns in the
// operator's namespace.
func jobElsewhere(g Gomega, ns string) *batchv1.Job {
	list := testenv.Jobs(g, env.Client, operatorNamespace, client.MatchingLabels{controller.ForNamespaceLabel: ns})
	g.Expect(list).To(HaveLen(1))
	return &list[0]
}

// A Delete-policy BackupJob whose namespace is deleted still deletes its
// artifacts (issue 30): its S3 credentials Secret is kept by the operator's
// finalizer while the namespace is swept, the delete Job runs in the
// operator's namespace (the tenant's refuses new Jobs) with the two keys
// handed over in the operator's delete credentials Secret, and when it
// succeeded the Job, the keys and the finalizers go. Without the fix the
// BackupJob's create of its delete Job is refused until the deadline and
// nothing is deleted.
func TestNamespaceDeletionRunsTheArtifactDeleteInTheOperatorNamespace(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	creds := deleteCredentials(t)
	ns, key := sweptBackupJob(t)
	secKey := client.ObjectKey{Namespace: ns, Name: "s3-credentials"}
	g.Expect(env.Client.Delete(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "orders-db-credentials"}})).To(Succeed())

	var job *batchv1.Job
	g.Eventually(func(g Gomega) { job = jobElsewhere(g, ns) }).WithTimeout(30 * time.Second).Should(Succeed())
	g.Expect(job.Spec.Template.Spec.Containers[0].Args).To(Equal([]string{"delete"}))
	env1 := testenv.AgentEnv(job)
	g.Expect(env1["CAIRN_BACKUPJOB"].Value).To(Equal(ns + "/orders"))
	g.Expect(env1["AWS_ACCESS_KEY_ID"].ValueFrom.SecretKeyRef.Name).To(Equal(controller.DeleteCredentialsSecret))
	sec := &corev1.Secret{}
	g.Expect(env.Client.Get(ctx, creds, sec)).To(Succeed())
	g.Expect(string(sec.Data[env1["AWS_ACCESS_KEY_ID"].ValueFrom.SecretKeyRef.Key])).To(Equal("test-accessKeyID"))
	g.Expect(string(sec.Data[env1["AWS_SECRET_ACCESS_KEY"].ValueFrom.SecretKeyRef.Key])).To(Equal("test-secretAccessKey"))
	// The tenant's Secret is kept while the delete runs.
	g.Consistently(func(g Gomega) {
		g.Expect(env.Client.Get(ctx, secKey, &corev1.Secret{})).To(Succeed())
		g.Expect(env.Client.Get(ctx, key, &backupv1.BackupJob{})).To(Succeed())
	}).WithTimeout(2 * time.Second).Should(Succeed())

	finishJob(g, job, metav1.Now(), true, "")
	g.Eventually(func(g Gomega) {
		g.Expect(apierrors.IsNotFound(env.Client.Get(ctx, key, &backupv1.BackupJob{}))).To(BeTrue(), "BackupJob still there")
		g.Expect(apierrors.IsNotFound(env.Client.Get(ctx, secKey, &corev1.Secret{}))).To(BeTrue(), "credentials Secret still kept")
		j := &batchv1.Job{}
		err := env.Client.Get(ctx, client.ObjectKeyFromObject(job), j)
		g.Expect(apierrors.IsNotFound(err) || !j.DeletionTimestamp.IsZero()).To(BeTrue(), "delete Job not deleted")
		g.Expect(env.Client.Get(ctx, creds, sec)).To(Succeed())
		for k := range sec.Data {
			g.Expect(k).NotTo(HavePrefix(job.Name), "the delete Job's keys are still in the delete credentials Secret")
		}
	}).WithTimeout(30 * time.Second).Should(Succeed())
}

// The store is down when the namespace is deleted: the delete Job in the
// operator's namespace fails; the BackupJob says so in one condition that
// is not rewritten while it waits, and at the deadline the finalizer goes,
// the Job and the handed-over keys with it, and a Warning Event names what
// was left and where — on the namespace (Events in a namespace being
// deleted are refused), so it outlives it.
func TestNamespaceDeletionStoreDownDeadline(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	creds := deleteCredentials(t)
	ns, key := sweptBackupJob(t)

	var job *batchv1.Job
	g.Eventually(func(g Gomega) { job = jobElsewhere(g, ns) }).WithTimeout(30 * time.Second).Should(Succeed())
	deleted := get(g, key).DeletionTimestamp.Time
	// Two seconds before the deadline (the suite's is an hour): the next
	// look is at the deadline, not a retry interval or a backoff later.
	before := deleted.Add(time.Hour - 2*time.Second)
	clock.Store(&before)
	t.Cleanup(func() { clock.Store(nil) })
	finishJob(g, job, metav1.Now(), false, "store unreachable")
	var stored *backupv1.BackupJob
	g.Eventually(func(g Gomega) {
		stored = get(g, key)
		g.Expect(stored.Status.Phase).To(Equal(backupv1.PhaseDeleting))
		g.Expect(stored.Status.Conditions).To(ContainElement(And(
			HaveField("Type", cairnv1.ReconcilingCondition),
			HaveField("Message", ContainSubstring("store unreachable")))))
	}).WithTimeout(30 * time.Second).Should(Succeed())
	// Waiting writes nothing: the passes every two seconds find the same
	// condition.
	g.Consistently(func(g Gomega) {
		g.Expect(get(g, key).ResourceVersion).To(Equal(stored.ResourceVersion))
	}).WithTimeout(5 * time.Second).WithPolling(500 * time.Millisecond).Should(Succeed())

	after := deleted.Add(time.Hour + time.Second)
	clock.Store(&after)
	g.Eventually(func(g Gomega) {
		g.Expect(apierrors.IsNotFound(env.Client.Get(ctx, key, &backupv1.BackupJob{}))).To(BeTrue(), "BackupJob still there")
		j := &batchv1.Job{}
		err := env.Client.Get(ctx, client.ObjectKeyFromObject(job), j)
		g.Expect(apierrors.IsNotFound(err) || !j.DeletionTimestamp.IsZero()).To(BeTrue(), "the given-up delete Job was not deleted")
		sec := &corev1.Secret{}
		g.Expect(env.Client.Get(ctx, creds, sec)).To(Succeed())
		for k := range sec.Data {
			g.Expect(k).NotTo(HavePrefix(job.Name), "the given-up delete Job's keys are still handed over")
		}
		g.Expect(apierrors.IsNotFound(env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: "s3-credentials"}, &corev1.Secret{}))).To(BeTrue(), "credentials Secret still kept")
	}).WithTimeout(30 * time.Second).Should(Succeed())
	g.Eventually(func(g Gomega) {
		note := namespaceEvent(g, ns, "CleanupDeadlineExceeded")
		g.Expect(note).To(ContainSubstring("BackupJob " + ns + "/orders"))
		g.Expect(note).To(ContainSubstring("stored artifacts at s3://backups"))
	}).WithTimeout(30 * time.Second).Should(Succeed())
}

// A PVC store that cannot be reached from the operator's namespace either
// (here: the claim names a volume that does not exist) ends cleanup at
// once, not at the deadline, with a Warning Event on the namespace that
// says the artifacts were not deleted, why, and where they are.
func TestNamespaceDeletionPVCStoreEndsAtOnceWithEvent(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	ns := newNamespace(t)
	claim := &corev1.PersistentVolumeClaim{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "backups"},
		Spec: corev1.PersistentVolumeClaimSpec{
			AccessModes: []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce}, VolumeName: ns + "-nowhere",
			Resources: corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("1Gi")}},
		},
	}
	g.Expect(env.Client.Create(ctx, claim)).To(Succeed())
	key := pvcBackupJob(t, ns)
	env.TerminateNamespace(t, ns)
	g.Expect(env.Client.Delete(ctx, get(g, key))).To(Succeed())
	g.Eventually(func() bool {
		return apierrors.IsNotFound(env.Client.Get(ctx, key, &backupv1.BackupJob{}))
	}).WithTimeout(30 * time.Second).Should(BeTrue())
	g.Eventually(func(g Gomega) {
		note := namespaceEvent(g, ns, "ArtifactsNotDeleted")
		g.Expect(note).To(ContainSubstring("PVC backups/cairn"))
		g.Expect(note).To(ContainSubstring("volume " + ns + "-nowhere is gone"))
	}).WithTimeout(30 * time.Second).Should(Succeed())
}

// A Secret no Delete-policy BackupJob needs is released: switching to
// Retain removes the finalizer (a Secret never stays Terminating because of
// Cairn).
func TestCredentialsReleasedWhenNoLongerNeeded(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	ns := newNamespace(t)
	bj := backupJob(ns, "orders")
	bj.Spec.DeletionPolicy = backupv1.DeletionPolicyDelete
	create(t, bj)
	key := client.ObjectKeyFromObject(bj)
	secKey := client.ObjectKey{Namespace: ns, Name: "s3-credentials"}
	held := func(g Gomega) bool {
		sec := &corev1.Secret{}
		g.Expect(env.Client.Get(ctx, secKey, sec)).To(Succeed())
		return controllerutil.ContainsFinalizer(sec, controller.CredentialsFinalizer)
	}
	g.Eventually(held).WithTimeout(30 * time.Second).Should(BeTrue())
	update(t, key, func(bj *backupv1.BackupJob) { bj.Spec.DeletionPolicy = backupv1.DeletionPolicyRetain })
	g.Eventually(held).WithTimeout(30 * time.Second).Should(BeFalse())
}

// sweptBackupJob makes a Delete-policy BackupJob on S3, waits until its
// credentials Secret carries the operator's finalizer, deletes its
// namespace, and deletes the Secret and the BackupJob as the namespace
// controller's sweep would.
func sweptBackupJob(t *testing.T) (string, client.ObjectKey) {
	t.Helper()
	g := NewWithT(t)
	ctx := context.Background()
	ns := newNamespace(t)
	bj := backupJob(ns, "orders")
	bj.Spec.DeletionPolicy = backupv1.DeletionPolicyDelete
	create(t, bj)
	key := client.ObjectKeyFromObject(bj)
	converged(t, key, backupv1.PhaseScheduled)
	secret := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "s3-credentials"}}
	g.Eventually(func(g Gomega) {
		sec := &corev1.Secret{}
		g.Expect(env.Client.Get(ctx, client.ObjectKeyFromObject(secret), sec)).To(Succeed())
		g.Expect(sec.Finalizers).To(ContainElement(controller.CredentialsFinalizer))
	}).WithTimeout(30 * time.Second).Should(Succeed())
	env.TerminateNamespace(t, ns)
	g.Expect(env.Client.Delete(ctx, secret)).To(Succeed())
	g.Expect(env.Client.Delete(ctx, get(g, key))).To(Succeed())
	return ns, key
}

// namespaceEvent is the note of the Warning Event with reason about
// namespace ns (Events about a namespace live in "default").
func namespaceEvent(g Gomega, ns, reason string) string {
	list := &eventsv1.EventList{}
	g.Expect(env.Client.List(context.Background(), list, client.InNamespace(metav1.NamespaceDefault))).To(Succeed())
	var notes []string
	for _, e := range list.Items {
		if e.Regarding.Kind == "Namespace" && e.Regarding.Name == ns && e.Reason == reason && e.Type == corev1.EventTypeWarning {
			notes = append(notes, e.Note)
		}
	}
	g.Expect(notes).To(HaveLen(1))
	return strings.Join(notes, "")
}
