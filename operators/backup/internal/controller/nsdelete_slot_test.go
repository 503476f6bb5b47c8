package controller_test

import (
	"context"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	"cairn.dev/agent/contract"
	backupv1 "cairn.dev/apis/backup/v1"
	cairnv1 "cairn.dev/apis/meta/v1"
	"cairn.dev/libs/agentjob"
	"cairn.dev/libs/testing/testenv"
	"cairn.dev/operators/backup/internal/controller"
)

// slotJobElsewhere is the slot release Job for namespace ns in the
// operator's namespace.
func slotJobElsewhere(g Gomega, ns string) *batchv1.Job {
	list := testenv.Jobs(g, env.Client, operatorNamespace, client.MatchingLabels{controller.ForNamespaceLabel: ns, controller.RunKindLabel: "release-slot"})
	g.Expect(list).To(HaveLen(1))
	return &list[0]
}

// sweptPointInTimeBackupJob makes a Retain-policy PostgreSQL BackupJob with
// point-in-time on whose database host is a short Service name, waits
// until its archiver runs and its database Secret carries the operator's
// finalizer (Retain: the S3 Secret does not), deletes its namespace, and
// deletes the database Secret and the BackupJob as the namespace
// controller's sweep would.
func sweptPointInTimeBackupJob(t *testing.T) (string, client.ObjectKey, client.ObjectKey) {
	t.Helper()
	g := NewWithT(t)
	ctx := context.Background()
	ns := newNamespace(t)
	b := backupJob(ns, "orders")
	b.Spec.Database.Host, b.Spec.Database.Port = "orders-db", 5433
	b.Spec.DeletionPolicy = backupv1.DeletionPolicyRetain
	b.Spec.PointInTime = &backupv1.PointInTimeSpec{}
	bj := create(t, b)
	key := client.ObjectKeyFromObject(bj)
	dbKey := client.ObjectKey{Namespace: ns, Name: "orders-db-credentials"}
	held := func(g Gomega, key client.ObjectKey) bool {
		sec := &corev1.Secret{}
		g.Expect(env.Client.Get(ctx, key, sec)).To(Succeed())
		return controllerutil.ContainsFinalizer(sec, controller.CredentialsFinalizer)
	}
	g.Eventually(func(g Gomega) {
		archiverOf(g, bj)
		g.Expect(held(g, dbKey)).To(BeTrue(), "the database Secret of a Retain-policy point-in-time BackupJob is not held")
	}).WithTimeout(30 * time.Second).Should(Succeed())
	g.Expect(held(g, client.ObjectKey{Namespace: ns, Name: "s3-credentials"})).To(BeFalse(), "Retain: the S3 Secret is not needed after the namespace")
	env.TerminateNamespace(t, ns)
	g.Expect(env.Client.Delete(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: dbKey.Name}})).To(Succeed())
	g.Expect(env.Client.Delete(ctx, get(g, key))).To(Succeed())
	return ns, key, dbKey
}

// keysHandedOver fails while DeleteCredentialsSecret holds a key of job.
func keysHandedOver(g Gomega, job *batchv1.Job) {
	sec := &corev1.Secret{}
	g.Expect(env.Client.Get(context.Background(), client.ObjectKey{Namespace: operatorNamespace, Name: controller.DeleteCredentialsSecret}, sec)).To(Succeed())
	for k := range sec.Data {
		g.Expect(k).NotTo(HavePrefix(job.Name), "the release Job's keys are still in the delete credentials Secret")
	}
}

// A PostgreSQL point-in-time BackupJob whose namespace is deleted still has
// its archiver's replication slot dropped (issue 27): the database Secret
// is kept by the operator's finalizer (deletionPolicy Retain too), the
// release Job runs in the operator's namespace (the tenant's refuses new
// Jobs) with no store, the two database keys handed over and the short
// Service name made resolvable from there; when it succeeded the Job, the
// keys and the finalizers go. Before, the slot was left with a Warning.
func TestNamespaceDeletionReleasesTheSlotInTheOperatorNamespace(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	creds := deleteCredentials(t)
	ns, key, dbKey := sweptPointInTimeBackupJob(t)
	uid := get(g, key).UID

	var job *batchv1.Job
	g.Eventually(func(g Gomega) { job = slotJobElsewhere(g, ns) }).WithTimeout(30 * time.Second).Should(Succeed())
	g.Expect(job.Labels).NotTo(HaveKey(controller.BackupJobLabel), "its events must not map to a BackupJob of the operator's namespace")
	g.Expect(job.Annotations["backup.cairn.dev/for-uid"]).To(Equal(string(uid)))
	g.Expect(job.Spec.TTLSecondsAfterFinished).NotTo(BeNil())
	g.Expect(*job.Spec.ActiveDeadlineSeconds).To(And(BeNumerically(">", 3500), BeNumerically("<=", 3600)), "bounded by the cleanup deadline (an hour here)")
	pod := job.Spec.Template.Spec
	g.Expect(pod.Containers[0].Args).To(Equal([]string{contract.CommandArchiveStatus}))
	g.Expect(pod.Volumes).To(HaveLen(1), "no store volume: only /tmp")
	g.Expect(agentjob.ContractProblems(job.Spec.Template)).To(BeEmpty(), "only variables the agent parses")
	e := testenv.AgentEnv(job)
	g.Expect(e[contract.EnvArchiveReleaseSlot].Value).To(Equal("true"))
	g.Expect(e[contract.EnvBackupJob].Value).To(Equal(ns + "/orders"))
	g.Expect(e[contract.EnvDBHost].Value).To(Equal("orders-db." + ns + ".svc"))
	g.Expect(e[contract.EnvDBPort].Value).To(Equal("5433"))
	g.Expect(e).NotTo(HaveKey(contract.EnvStore), "the release needs no store")
	g.Expect(e).NotTo(HaveKey(contract.EnvS3AccessKeyID))
	sec := &corev1.Secret{}
	g.Expect(env.Client.Get(ctx, creds, sec)).To(Succeed())
	for v, want := range map[string]string{contract.EnvDBUser: "test-username", contract.EnvDBPassword: "test-password"} {
		ref := e[v].ValueFrom.SecretKeyRef
		g.Expect(ref.Name).To(Equal(controller.DeleteCredentialsSecret))
		g.Expect(ref.Key).To(HavePrefix(job.Name + "."))
		g.Expect(string(sec.Data[ref.Key])).To(Equal(want))
	}
	// The tenant's database Secret is kept while the release runs.
	g.Consistently(func(g Gomega) {
		g.Expect(env.Client.Get(ctx, dbKey, &corev1.Secret{})).To(Succeed())
		g.Expect(env.Client.Get(ctx, key, &backupv1.BackupJob{})).To(Succeed())
	}).WithTimeout(2 * time.Second).Should(Succeed())

	finishJob(g, job, metav1.Now(), true, "")
	g.Eventually(func(g Gomega) {
		g.Expect(apierrors.IsNotFound(env.Client.Get(ctx, key, &backupv1.BackupJob{}))).To(BeTrue(), "BackupJob still there")
		g.Expect(apierrors.IsNotFound(env.Client.Get(ctx, dbKey, &corev1.Secret{}))).To(BeTrue(), "database Secret still kept")
		j := &batchv1.Job{}
		err := env.Client.Get(ctx, client.ObjectKeyFromObject(job), j)
		g.Expect(apierrors.IsNotFound(err) || !j.DeletionTimestamp.IsZero()).To(BeTrue(), "release Job not deleted")
		keysHandedOver(g, job)
	}).WithTimeout(30 * time.Second).Should(Succeed())
}

// The release from the operator's namespace fails (the source down, or it
// lived in the deleted namespace): it is run again after a minute, until
// the cleanup deadline; then the finalizer goes, the Job and the keys with
// it, and a SlotLeft Warning on the Namespace names the slot and the
// statement that drops it.
func TestNamespaceDeletionSlotReleaseFailsUntilTheDeadline(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	deleteCredentials(t)
	ns, key, dbKey := sweptPointInTimeBackupJob(t)
	t.Cleanup(func() { clock.Store(nil) })

	var job *batchv1.Job
	g.Eventually(func(g Gomega) { job = slotJobElsewhere(g, ns) }).WithTimeout(30 * time.Second).Should(Succeed())
	testenv.FailJob(t, env.Client, job, 1, `{"error":"archive-status failed: dial tcp orders-db:5433: connection refused","code":""}`)
	// Kept until the retry is due; the BackupJob says why.
	g.Eventually(func(g Gomega) {
		g.Expect(get(g, key).Status.Conditions).To(ContainElement(And(
			HaveField("Type", cairnv1.ReconcilingCondition),
			HaveField("Message", ContainSubstring("connection refused")))))
	}).WithTimeout(30 * time.Second).Should(Succeed())
	g.Consistently(func(g Gomega) {
		g.Expect(slotJobElsewhere(g, ns).UID).To(Equal(job.UID))
	}).WithTimeout(3 * time.Second).Should(Succeed())
	later := time.Now().Add(releaseRetryForTest + time.Second)
	clock.Store(&later)
	var retry *batchv1.Job
	g.Eventually(func(g Gomega) {
		retry = slotJobElsewhere(g, ns)
		g.Expect(retry.UID).NotTo(Equal(job.UID), "the failed release was not run again")
	}).WithTimeout(30 * time.Second).Should(Succeed())
	g.Expect(env.Client.Delete(ctx, &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: operatorNamespace, Name: job.Name + "-1"}})).To(Succeed()) // no garbage collector here
	testenv.FailJob(t, env.Client, retry, 1, `{"error":"archive-status failed: dial tcp orders-db:5433: no route to host","code":""}`)

	after := get(g, key).DeletionTimestamp.Add(time.Hour + time.Second)
	clock.Store(&after)
	g.Eventually(func(g Gomega) {
		g.Expect(apierrors.IsNotFound(env.Client.Get(ctx, key, &backupv1.BackupJob{}))).To(BeTrue(), "BackupJob still there")
		g.Expect(apierrors.IsNotFound(env.Client.Get(ctx, dbKey, &corev1.Secret{}))).To(BeTrue(), "database Secret still kept")
		j := &batchv1.Job{}
		err := env.Client.Get(ctx, client.ObjectKeyFromObject(retry), j)
		g.Expect(apierrors.IsNotFound(err) || !j.DeletionTimestamp.IsZero()).To(BeTrue(), "the given-up release Job was not deleted")
		keysHandedOver(g, retry)
	}).WithTimeout(30 * time.Second).Should(Succeed())
	slot := contract.SlotName(ns + "/orders")
	g.Eventually(func(g Gomega) {
		note := namespaceEvent(g, ns, "SlotLeft")
		g.Expect(note).To(ContainSubstring("BackupJob " + ns + "/orders"))
		g.Expect(note).To(ContainSubstring("orders-db:5433"))
		g.Expect(note).To(ContainSubstring("SELECT pg_drop_replication_slot('" + slot + "')"))
		g.Expect(note).To(ContainSubstring("no route to host"), "the last attempt's reason")
	}).WithTimeout(30 * time.Second).Should(Succeed())
}

// releaseRetryForTest is the operator's wait before a failed release runs
// again (releaseRetry).
const releaseRetryForTest = time.Minute

// A Job of the release's name in the operator's namespace that was not
// started for this BackupJob (no for-uid annotation of its UID) is never
// taken for its release: the BackupJob says so, no keys are handed to it;
// once it is gone, the release runs.
func TestNamespaceDeletionSlotReleaseNeverAdoptsAForeignJob(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	deleteCredentials(t)
	ns := newNamespace(t)
	b := backupJob(ns, "orders")
	b.Spec.PointInTime = &backupv1.PointInTimeSpec{}
	bj := create(t, b)
	key := client.ObjectKeyFromObject(bj)
	g.Eventually(func(g Gomega) { archiverOf(g, bj) }).WithTimeout(30 * time.Second).Should(Succeed())
	foreign := testenv.ForeignJob(operatorNamespace, controller.SlotJobElsewhereName(get(g, key)))
	g.Expect(env.Client.Create(ctx, foreign)).To(Succeed())
	t.Cleanup(func() {
		_ = env.Client.Delete(context.Background(), foreign, client.PropagationPolicy(metav1.DeletePropagationBackground))
	})
	env.TerminateNamespace(t, ns)
	g.Expect(env.Client.Delete(ctx, get(g, key))).To(Succeed())

	g.Eventually(func(g Gomega) {
		g.Expect(get(g, key).Status.Conditions).To(ContainElement(And(
			HaveField("Type", cairnv1.ReconcilingCondition),
			HaveField("Message", ContainSubstring("was not started for this BackupJob")))))
	}).WithTimeout(30 * time.Second).Should(Succeed())
	cur := &batchv1.Job{}
	g.Expect(env.Client.Get(ctx, client.ObjectKeyFromObject(foreign), cur)).To(Succeed())
	g.Expect(cur.UID).To(Equal(foreign.UID), "the foreign Job was replaced")
	keysHandedOver(g, foreign)

	g.Expect(env.Client.Delete(ctx, foreign, client.PropagationPolicy(metav1.DeletePropagationBackground))).To(Succeed())
	var job *batchv1.Job
	g.Eventually(func(g Gomega) {
		job = slotJobElsewhere(g, ns)
		g.Expect(job.UID).NotTo(Equal(foreign.UID))
	}).WithTimeout(30 * time.Second).Should(Succeed())
	finishJob(g, job, metav1.Now(), true, "")
	g.Eventually(func() bool {
		return apierrors.IsNotFound(env.Client.Get(ctx, key, &backupv1.BackupJob{}))
	}).WithTimeout(30*time.Second).Should(BeTrue(), "BackupJob still there")
}
