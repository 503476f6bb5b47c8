package controller_test

import (
	"context"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/cli-utils/pkg/kstatus/status"
	"sigs.k8s.io/controller-runtime/pkg/client"

	backupv1 "cairn.dev/apis/backup/v1"
	cairnv1 "cairn.dev/apis/meta/v1"
	restorev1 "cairn.dev/apis/restore/v1"
	"cairn.dev/libs/conditions"
	"cairn.dev/libs/testing/testenv"
)

// The newest successful artifact of a BackupJob is resolved, recorded, given
// to the one Job explicitly, and the agent's report ends up in status.
func TestRestoreNewestArtifactOfBackupJob(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	startOperator(t, operatorOptions{})
	ns := namespace(t)
	newest := artifactOf("orders-db", "20260102T030405.123Z")
	createBackupJob(t, ns, "orders-db", sourceDB(), &newest)

	rj := restoreJob(ns, "verify", fromBackupJob("orders-db", ""))
	g.Expect(env.Client.Create(ctx, rj)).To(Succeed())
	// Defaults and the finalizer come from the mutating webhook.
	g.Expect(rj.Finalizers).To(ContainElement(restorev1.CleanupFinalizer))
	g.Expect(*rj.Spec.MaxRetries).To(Equal(int32(3)))
	g.Expect(*rj.Spec.ActiveDeadlineSeconds).To(Equal(int64(3600)))
	g.Expect(rj.Spec.Target.Port).To(Equal(int32(5432)))

	job := waitForJob(t, rj)
	g.Expect(metav1.IsControlledBy(job, current(g, rj))).To(BeTrue())
	g.Expect(job.Labels).To(HaveKeyWithValue(restorev1.RestoreJobLabel, "verify"))
	g.Expect(job.Labels).To(HaveKeyWithValue("app.kubernetes.io/managed-by", "cairn-restore-operator"))
	g.Expect(job.Spec.Template.Labels).To(HaveKeyWithValue(restorev1.RestoreJobLabel, "verify"))
	g.Expect(*job.Spec.BackoffLimit).To(Equal(int32(3)))
	g.Expect(*job.Spec.ActiveDeadlineSeconds).To(Equal(int64(3600)))
	c := job.Spec.Template.Spec.Containers[0]
	g.Expect(c.Image).To(Equal(agentImage))
	g.Expect(c.Args).To(Equal([]string{"restore"}))
	g.Expect(envOf(job, "CAIRN_ARTIFACT")).To(Equal(newest.Path))
	g.Expect(envOf(job, "CAIRN_BACKUPJOB")).To(Equal(ns + "/orders-db"))
	g.Expect(envOf(job, "CAIRN_STORE")).To(Equal("pvc"))
	g.Expect(envOf(job, "CAIRN_DB_HOST")).To(Equal("scratch-db"))
	g.Expect(envOf(job, "CAIRN_DB_NAME")).To(Equal("orders_verify"))
	g.Expect(envOf(job, "CAIRN_DB_PORT")).To(Equal("5432"))
	for _, e := range c.Env {
		if e.Name == "CAIRN_DB_PASSWORD" {
			g.Expect(e.Value).To(BeEmpty())
			g.Expect(e.ValueFrom.SecretKeyRef.Name).To(Equal("scratch-db-credentials"))
		}
	}
	g.Expect(*job.Spec.Template.Spec.SecurityContext.RunAsNonRoot).To(BeTrue())
	g.Expect(*c.SecurityContext.AllowPrivilegeEscalation).To(BeFalse())
	g.Expect(c.SecurityContext.Capabilities.Drop).To(ContainElement(corev1.Capability("ALL")))
	g.Expect(job.Spec.Template.Spec.Volumes).To(ContainElement(HaveField("VolumeSource.PersistentVolumeClaim.ClaimName", "backups")))

	g.Eventually(phaseOf(rj)).WithTimeout(timeout).Should(Equal(restorev1.PhaseRunning))
	cur := current(g, rj)
	g.Expect(cur.Status.Artifact).To(Equal(&newest))
	g.Expect(cur.Status.Source).To(Equal("backupjob/orders-db"))
	g.Expect(cur.Status.JobName).To(Equal("verify-restore"))
	g.Expect(cur.Status.StartTime).NotTo(BeNil())
	g.Expect(cur.Status.ObservedGeneration).To(Equal(cur.Generation))
	g.Expect(kstatusOf(rj)(g)).To(Equal(status.InProgressStatus))

	startJob(t, job)
	g.Eventually(func(g Gomega) int32 { return current(g, rj).Status.Attempts }).WithTimeout(timeout).Should(Equal(int32(1)))

	restored := newest
	restored.Checksum = "sha256:" + strings.Repeat("a", 64)
	completeJob(t, job, restored)
	g.Eventually(phaseOf(rj)).WithTimeout(timeout).Should(Equal(restorev1.PhaseSucceeded))
	cur = current(g, rj)
	g.Expect(cur.Status.Artifact).To(Equal(&restored), "the artifact the agent reported")
	g.Expect(cur.Status.CompletionTime).NotTo(BeNil())
	g.Expect(cur.Status.Attempts).To(Equal(int32(1)))
	g.Expect(conditions.IsTrue(cur, cairnv1.ReadyCondition)).To(BeTrue())
	g.Expect(conditions.Get(cur, cairnv1.ReconcilingCondition)).To(BeNil())
	g.Expect(conditions.Get(cur, cairnv1.StalledCondition)).To(BeNil())
	g.Expect(kstatusOf(rj)(g)).To(Equal(status.CurrentStatus))
	g.Eventually(testenv.EventReasons(env.Client, ns, "RestoreJob", "verify")).WithTimeout(timeout).Should(ContainElements(
		"Normal/"+restorev1.RestoreJobArtifactResolvedReason, "Normal/"+restorev1.RestoreJobRunningReason, "Normal/"+cairnv1.SucceededReason))
	g.Expect(jobs(g, ns)).To(HaveLen(1))
	g.Expect(testenv.MetricValue(g, "cairn_restorejob_finished_total", map[string]string{"namespace": ns, "result": "Succeeded"})).To(Equal(1.0))
	g.Expect(testenv.MetricValue(g, "cairn_restorejob_duration_seconds", map[string]string{"namespace": ns, "result": "Succeeded"})).To(Equal(1.0))
	g.Expect(testenv.MetricValue(g, "cairn_restorejob_last_success_timestamp_seconds", map[string]string{"namespace": ns, "source": "backupjob/orders-db"})).
		To(BeNumerically("~", float64(cur.Status.CompletionTime.Unix()), 1))
}

// A named artifact is restored even though the BackupJob has a newer one.
func TestRestoreNamedArtifactOfBackupJob(t *testing.T) {
	g := NewWithT(t)
	startOperator(t, operatorOptions{})
	ns := namespace(t)
	newest := artifactOf("orders-db", "20260105T020000.000Z")
	createBackupJob(t, ns, "orders-db", sourceDB(), &newest)

	named := "shop_orders-db_20260101T020000.000Z.pgdump.zst"
	rj := restoreJob(ns, "named", fromBackupJob("orders-db", named))
	g.Expect(env.Client.Create(context.Background(), rj)).To(Succeed())
	job := waitForJob(t, rj)
	g.Expect(envOf(job, "CAIRN_ARTIFACT")).To(Equal(named))
	g.Eventually(func(g Gomega) *cairnv1.Artifact { return current(g, rj).Status.Artifact }).
		WithTimeout(timeout).Should(Equal(&cairnv1.Artifact{Path: named}))
}

// A store and catalog key restore without any BackupJob in the cluster.
func TestRestoreFromStore(t *testing.T) {
	g := NewWithT(t)
	startOperator(t, operatorOptions{})
	ns := namespace(t)
	artifact := "prod/shop/orders-db/shop_orders-db_20260102T030405.123Z.pgdump.zst"
	rj := restoreJob(ns, "from-store", restorev1.RestoreSource{Store: &restorev1.StoreSource{
		Storage: s3Storage(), BackupJob: "shop/orders-db", Artifact: artifact,
	}})
	g.Expect(env.Client.Create(context.Background(), rj)).To(Succeed())
	job := waitForJob(t, rj)
	g.Expect(envOf(job, "CAIRN_STORE")).To(Equal("s3"))
	g.Expect(envOf(job, "CAIRN_S3_BUCKET")).To(Equal("cairn-backups"))
	g.Expect(envOf(job, "CAIRN_S3_PREFIX")).To(Equal("prod"))
	g.Expect(envOf(job, "CAIRN_BACKUPJOB")).To(Equal("shop/orders-db"))
	g.Expect(envOf(job, "CAIRN_ARTIFACT")).To(Equal(artifact))
	g.Eventually(phaseOf(rj)).WithTimeout(timeout).Should(Equal(restorev1.PhaseRunning))
	g.Expect(current(g, rj).Status.Source).To(Equal("s3://cairn-backups/prod shop/orders-db"))

	restored := cairnv1.Artifact{Path: artifact, Size: 42, Checksum: "sha256:" + strings.Repeat("b", 64)}
	completeJob(t, job, restored)
	g.Eventually(func(g Gomega) *cairnv1.Artifact {
		cur := current(g, rj)
		g.Expect(cur.Status.Phase).To(Equal(restorev1.PhaseSucceeded))
		return cur.Status.Artifact
	}).WithTimeout(timeout).Should(Equal(&restored))
}

// Without a BackupJob, and then without a successful artifact, the
// RestoreJob waits (Pending, no Job); it starts once the artifact appears.
func TestWaitsForBackupJobAndFirstArtifact(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	startOperator(t, operatorOptions{})
	ns := namespace(t)
	rj := restoreJob(ns, "early", fromBackupJob("orders-db", ""))
	g.Expect(env.Client.Create(ctx, rj)).To(Succeed())

	reason := func(g Gomega) string {
		c := conditions.Get(current(g, rj), cairnv1.ReconcilingCondition)
		g.Expect(c).NotTo(BeNil())
		return c.Reason
	}
	g.Eventually(reason).WithTimeout(timeout).Should(Equal(restorev1.RestoreJobBackupJobNotFoundReason))
	g.Expect(current(g, rj).Status.Phase).To(Equal(restorev1.PhasePending))
	g.Expect(kstatusOf(rj)(g)).To(Equal(status.InProgressStatus))

	bj := createBackupJob(t, ns, "orders-db", sourceDB(), nil)
	g.Eventually(reason).WithTimeout(timeout).Should(Equal(restorev1.RestoreJobNoArtifactReason))
	g.Consistently(func(g Gomega) []batchv1.Job { return jobs(g, ns) }).WithTimeout(3 * time.Second).Should(BeEmpty())
	g.Expect(current(g, rj).Status.Artifact).To(BeNil())

	first := artifactOf("orders-db", "20260103T020000.000Z")
	setLastArtifact(t, bj, first)
	job := waitForJob(t, rj)
	g.Expect(envOf(job, "CAIRN_ARTIFACT")).To(Equal(first.Path))
	g.Eventually(phaseOf(rj)).WithTimeout(timeout).Should(Equal(restorev1.PhaseRunning))
	g.Expect(current(g, rj).Status.Artifact).To(Equal(&first))
	g.Eventually(testenv.EventReasons(env.Client, ns, "RestoreJob", "early")).WithTimeout(timeout).Should(ContainElements(
		"Normal/"+restorev1.RestoreJobBackupJobNotFoundReason, "Normal/"+restorev1.RestoreJobNoArtifactReason))
}

// A Job that failed after its retries fails the RestoreJob: Failed, Stalled,
// the agent's reason in the message, a Warning Event, kstatus Failed.
func TestFailureAfterRetries(t *testing.T) {
	g := NewWithT(t)
	startOperator(t, operatorOptions{})
	ns := namespace(t)
	last := artifactOf("orders-db", "20260102T030405.123Z")
	createBackupJob(t, ns, "orders-db", sourceDB(), &last)
	rj := restoreJob(ns, "doomed", fromBackupJob("orders-db", ""))
	g.Expect(env.Client.Create(context.Background(), rj)).To(Succeed())
	job := waitForJob(t, rj)

	failJob(t, job, 4, "restore failed: refusing to restore: artifact is corrupted: checksum mismatch; the target database was not touched")
	g.Eventually(phaseOf(rj)).WithTimeout(timeout).Should(Equal(restorev1.PhaseFailed))
	cur := current(g, rj)
	g.Expect(cur.Status.Attempts).To(Equal(int32(4)))
	g.Expect(cur.Status.CompletionTime).NotTo(BeNil())
	g.Expect(cur.Status.Artifact).To(Equal(&last))
	stalled := conditions.Get(cur, cairnv1.StalledCondition)
	g.Expect(stalled).NotTo(BeNil())
	g.Expect(stalled.Status).To(Equal(metav1.ConditionTrue))
	g.Expect(stalled.Reason).To(Equal(cairnv1.FailedReason))
	g.Expect(stalled.Message).To(ContainSubstring("BackoffLimitExceeded"))
	g.Expect(stalled.Message).To(ContainSubstring("artifact is corrupted"))
	g.Expect(conditions.IsTrue(cur, cairnv1.ReadyCondition)).To(BeFalse())
	g.Expect(kstatusOf(rj)(g)).To(Equal(status.FailedStatus))
	g.Eventually(testenv.EventReasons(env.Client, ns, "RestoreJob", "doomed")).WithTimeout(timeout).Should(ContainElement("Warning/" + cairnv1.FailedReason))
	// Final: no new Job, the phase stays.
	g.Consistently(func(g Gomega) int { return len(jobs(g, ns)) }).WithTimeout(2 * time.Second).Should(Equal(1))
	g.Expect(current(g, rj).Status.Phase).To(Equal(restorev1.PhaseFailed))
	g.Expect(testenv.MetricValue(g, "cairn_restorejob_finished_total", map[string]string{"namespace": ns, "result": "Failed"})).To(Equal(1.0))
	g.Expect(testenv.MetricValue(g, "cairn_restorejob_finished_total", map[string]string{"namespace": ns, "result": "Succeeded"})).To(Equal(-1.0))
}

// An operator restart in the middle of a restore creates no second Job and
// keeps the artifact it chose, although the BackupJob has a newer one now.
func TestRestartMidRunKeepsTheArtifact(t *testing.T) {
	g := NewWithT(t)
	ns := namespace(t)
	first := artifactOf("orders-db", "20260102T030405.123Z")
	bj := createBackupJob(t, ns, "orders-db", sourceDB(), &first)

	op := startOperator(t, operatorOptions{})
	rj := restoreJob(ns, "restart", fromBackupJob("orders-db", ""))
	g.Expect(env.Client.Create(context.Background(), rj)).To(Succeed())
	job := waitForJob(t, rj)
	g.Eventually(phaseOf(rj)).WithTimeout(timeout).Should(Equal(restorev1.PhaseRunning))
	g.Expect(op.Stop()).To(Succeed())

	newer := artifactOf("orders-db", "20260103T030405.123Z")
	setLastArtifact(t, bj, newer)
	startJob(t, job) // the run goes on while the operator is down

	startOperator(t, operatorOptions{})
	g.Eventually(func(g Gomega) int32 { return current(g, rj).Status.Attempts }).WithTimeout(timeout).Should(Equal(int32(1)))
	g.Consistently(func(g Gomega) {
		list := jobs(g, ns)
		g.Expect(list).To(HaveLen(1))
		g.Expect(list[0].UID).To(Equal(job.UID))
		g.Expect(envOf(&list[0], "CAIRN_ARTIFACT")).To(Equal(first.Path))
		g.Expect(current(g, rj).Status.Artifact).To(Equal(&first))
	}).WithTimeout(3 * time.Second).Should(Succeed())

	completeJob(t, job, first)
	g.Eventually(phaseOf(rj)).WithTimeout(timeout).Should(Equal(restorev1.PhaseSucceeded))
	g.Expect(current(g, rj).Status.Artifact.Path).To(Equal(first.Path))
}

// Deleting a running RestoreJob removes its Job, then the RestoreJob goes.
func TestDeletionMidRun(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	startOperator(t, operatorOptions{})
	ns := namespace(t)
	last := artifactOf("orders-db", "20260102T030405.123Z")
	createBackupJob(t, ns, "orders-db", sourceDB(), &last)
	rj := restoreJob(ns, "cancelled", fromBackupJob("orders-db", ""))
	g.Expect(env.Client.Create(ctx, rj)).To(Succeed())
	job := waitForJob(t, rj)
	startJob(t, job)
	g.Eventually(phaseOf(rj)).WithTimeout(timeout).Should(Equal(restorev1.PhaseRunning))

	g.Expect(env.Client.Delete(ctx, rj)).To(Succeed())
	g.Eventually(testenv.Gone(env.Client, &batchv1.Job{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: job.Name}})).WithTimeout(timeout).Should(BeTrue())
	g.Eventually(testenv.Gone(env.Client, &restorev1.RestoreJob{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: rj.Name}})).WithTimeout(timeout).Should(BeTrue())
	// The BackupJob is untouched.
	bj := &backupv1.BackupJob{}
	g.Expect(env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: "orders-db"}, bj)).To(Succeed())
	g.Expect(bj.DeletionTimestamp).To(BeNil())
}

// A Job deleted out of band before it finished fails the RestoreJob; the
// restore is not started again behind the user's back.
func TestJobDeletedOutOfBand(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	startOperator(t, operatorOptions{})
	ns := namespace(t)
	last := artifactOf("orders-db", "20260102T030405.123Z")
	createBackupJob(t, ns, "orders-db", sourceDB(), &last)
	rj := restoreJob(ns, "orphaned", fromBackupJob("orders-db", ""))
	g.Expect(env.Client.Create(ctx, rj)).To(Succeed())
	job := waitForJob(t, rj)
	g.Eventually(phaseOf(rj)).WithTimeout(timeout).Should(Equal(restorev1.PhaseRunning))

	g.Expect(env.Client.Delete(ctx, job, client.PropagationPolicy(metav1.DeletePropagationBackground))).To(Succeed())
	g.Eventually(phaseOf(rj)).WithTimeout(timeout).Should(Equal(restorev1.PhaseFailed))
	g.Expect(conditions.Get(current(g, rj), cairnv1.StalledCondition).Reason).To(Equal(restorev1.RestoreJobJobDeletedReason))
	g.Consistently(func(g Gomega) []batchv1.Job { return jobs(g, ns) }).WithTimeout(2 * time.Second).Should(BeEmpty())
}

// A Job with the RestoreJob's Job name that the RestoreJob does not control
// is never adopted: the RestoreJob is Stalled with a Warning Event.
func TestForeignJobIsNotAdopted(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	startOperator(t, operatorOptions{})
	ns := namespace(t)
	last := artifactOf("orders-db", "20260102T030405.123Z")
	createBackupJob(t, ns, "orders-db", sourceDB(), &last)
	foreign := testenv.ForeignJob(ns, "taken-restore")
	g.Expect(env.Client.Create(ctx, foreign)).To(Succeed())
	rj := restoreJob(ns, "taken", fromBackupJob("orders-db", ""))
	g.Expect(env.Client.Create(ctx, rj)).To(Succeed())
	g.Eventually(func(g Gomega) string {
		c := conditions.Get(current(g, rj), cairnv1.StalledCondition)
		g.Expect(c).NotTo(BeNil())
		return c.Reason
	}).WithTimeout(timeout).Should(Equal(cairnv1.NotControlledReason))
	g.Expect(kstatusOf(rj)(g)).To(Equal(status.FailedStatus))
	get(g, foreign)
	g.Expect(foreign.OwnerReferences).To(BeEmpty())
	g.Eventually(testenv.EventReasons(env.Client, ns, "RestoreJob", "taken")).WithTimeout(timeout).Should(ContainElement("Warning/" + cairnv1.NotControlledReason))
}

// The controller applies the overwrite guard itself: a BackupJob created
// after the RestoreJob (so the webhook could not see it) that backs up the
// target database stops the RestoreJob before any Job exists.
func TestControllerRefusesToOverwriteSource(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	startOperator(t, operatorOptions{})
	ns := namespace(t)
	rj := restoreJob(ns, "oops", fromBackupJob("orders-db", ""))
	// The same database as the BackupJob's, spelled the way a pod in ns resolves it.
	rj.Spec.Target = sourceDB()
	rj.Spec.Target.Host = "orders-db.shop.svc.cluster.local"
	rj.Spec.Target.Port = 0
	g.Expect(env.Client.Create(ctx, rj)).To(Succeed())
	g.Eventually(func(g Gomega) string {
		c := conditions.Get(current(g, rj), cairnv1.ReconcilingCondition)
		g.Expect(c).NotTo(BeNil())
		return c.Reason
	}).WithTimeout(timeout).Should(Equal(restorev1.RestoreJobBackupJobNotFoundReason))

	last := artifactOf("orders-db", "20260102T030405.123Z")
	createBackupJob(t, ns, "orders-db", sourceDB(), &last)
	g.Eventually(func(g Gomega) string {
		c := conditions.Get(current(g, rj), cairnv1.StalledCondition)
		g.Expect(c).NotTo(BeNil())
		return c.Reason
	}).WithTimeout(timeout).Should(Equal(restorev1.RestoreJobOverwritesSourceReason))
	cur := current(g, rj)
	g.Expect(cur.Status.Phase).To(Equal(restorev1.PhasePending))
	g.Expect(conditions.Get(cur, cairnv1.StalledCondition).Message).To(ContainSubstring("allowOverwriteSource"))
	g.Expect(cur.Status.Artifact).To(BeNil())
	g.Consistently(func(g Gomega) []batchv1.Job { return jobs(g, ns) }).WithTimeout(2 * time.Second).Should(BeEmpty())
	g.Eventually(testenv.EventReasons(env.Client, ns, "RestoreJob", "oops")).WithTimeout(timeout).Should(ContainElement("Warning/" + restorev1.RestoreJobOverwritesSourceReason))
}

// A RestoreJob whose target credentials Secret is missing is Stalled with a
// message naming it, creates no Job, and starts by itself once the Secret
// exists.
func TestMissingReferenceIsReportedAndRecovers(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	startOperator(t, operatorOptions{})
	ns := namespace(t)
	newest := artifactOf("orders-db", "20260102T030405.123Z")
	createBackupJob(t, ns, "orders-db", sourceDB(), &newest)
	rj := restoreJob(ns, "norefs", fromBackupJob("orders-db", ""))
	rj.Spec.Target.CredentialsSecretRef.Name = "later-credentials"
	g.Expect(env.Client.Create(ctx, rj)).To(Succeed())
	g.Eventually(func(g Gomega) {
		c := conditions.Get(current(g, rj), cairnv1.StalledCondition)
		g.Expect(c).NotTo(BeNil())
		g.Expect(c.Reason).To(Equal(cairnv1.ReferenceNotFoundReason))
		g.Expect(c.Message).To(ContainSubstring("Secret " + ns + "/later-credentials (spec.target.credentialsSecretRef) not found"))
	}).WithTimeout(timeout).Should(Succeed())
	g.Eventually(testenv.EventReasons(env.Client, ns, "RestoreJob", "norefs")).WithTimeout(timeout).Should(ContainElement("Warning/" + cairnv1.ReferenceNotFoundReason))
	g.Consistently(func(g Gomega) []batchv1.Job { return jobs(g, ns) }).WithTimeout(2 * time.Second).Should(BeEmpty())
	g.Expect(env.Secret(ctx, ns, "later-credentials", "username", "password")).To(Succeed())
	waitForJob(t, rj)
}
