package controller_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/utils/ptr"
	kstatus "sigs.k8s.io/cli-utils/pkg/kstatus/status"
	"sigs.k8s.io/controller-runtime/pkg/client"
	crmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"

	backupv1 "cairn.dev/apis/backup/v1"
	cairnv1 "cairn.dev/apis/meta/v1"
	"cairn.dev/libs/finalizer"
	"cairn.dev/libs/testing/testenv"
	"cairn.dev/operators/backup/internal/controller"
)

func kstatusOf(g Gomega, key client.ObjectKey) kstatus.Status {
	u := &unstructured.Unstructured{}
	u.SetGroupVersionKind(backupv1.GroupVersion.WithKind("BackupJob"))
	g.Expect(env.Client.Get(context.Background(), key, u)).To(Succeed())
	res, err := kstatus.Compute(u)
	g.Expect(err).NotTo(HaveOccurred())
	return res.Status
}

func envFor(c corev1.Container) map[string]corev1.EnvVar {
	out := map[string]corev1.EnvVar{}
	for _, e := range c.Env {
		out[e.Name] = e
	}
	return out
}

func TestCreateMakesOneCronJobWithEveryFieldRight(t *testing.T) {
	g := NewWithT(t)
	ns := newNamespace(t)
	bj := backupJob(ns, "orders")
	bj.Spec.MaxRetries = ptr.To[int32](5)
	bj.Spec.ActiveDeadlineSeconds = ptr.To[int64](900)
	create(t, bj)
	key := client.ObjectKeyFromObject(bj)
	got := converged(t, key, backupv1.PhaseScheduled)

	cj := cronJob(g, key)
	g.Expect(metav1.IsControlledBy(cj, got)).To(BeTrue(), "controller reference")
	g.Expect(cj.Spec.Schedule).To(Equal("0 2 * * *"))
	g.Expect(cj.Spec.TimeZone).To(HaveValue(Equal("Asia/Shanghai")))
	g.Expect(cj.Spec.Suspend).To(HaveValue(BeFalse()))
	g.Expect(cj.Spec.ConcurrencyPolicy).To(Equal(batchv1.ForbidConcurrent))
	g.Expect(cj.Spec.SuccessfulJobsHistoryLimit).To(HaveValue(BeEquivalentTo(3)))
	g.Expect(cj.Spec.FailedJobsHistoryLimit).To(HaveValue(BeEquivalentTo(3)))
	js := cj.Spec.JobTemplate.Spec
	g.Expect(js.BackoffLimit).To(HaveValue(BeEquivalentTo(5)), "maxRetries → backoffLimit")
	g.Expect(js.ActiveDeadlineSeconds).To(HaveValue(BeEquivalentTo(900)))
	g.Expect(cj.Spec.JobTemplate.Labels).To(HaveKeyWithValue(controller.BackupJobLabel, "orders"))
	pod := js.Template.Spec
	g.Expect(pod.Containers).To(HaveLen(1))
	c := pod.Containers[0]
	g.Expect(c.Image).To(Equal(agentImage))
	g.Expect(c.Args).To(Equal([]string{"backup"}))
	g.Expect(pod.SecurityContext.RunAsNonRoot).To(HaveValue(BeTrue()))
	g.Expect(c.SecurityContext.AllowPrivilegeEscalation).To(HaveValue(BeFalse()))
	g.Expect(c.SecurityContext.ReadOnlyRootFilesystem).To(HaveValue(BeTrue()))
	g.Expect(c.SecurityContext.Capabilities.Drop).To(ConsistOf(corev1.Capability("ALL")))
	g.Expect(pod.SecurityContext.SeccompProfile.Type).To(Equal(corev1.SeccompProfileTypeRuntimeDefault))
	e := envFor(c)
	g.Expect(e["CAIRN_DB_PASSWORD"].ValueFrom.SecretKeyRef.Name).To(Equal("orders-db-credentials"))
	g.Expect(e["AWS_SECRET_ACCESS_KEY"].ValueFrom.SecretKeyRef.Name).To(Equal("s3-credentials"))
	g.Expect(e["CAIRN_BACKUPJOB"].Value).To(Equal(ns + "/orders"))
	g.Expect(e["CAIRN_RETENTION_DAYS"].Value).To(Equal("7"), "defaulted retentionDays")

	// Defaults from the webhook, status from the controller.
	g.Expect(got.Finalizers).To(ContainElement(backupv1.CleanupFinalizer))
	g.Expect(got.Spec.DeletionPolicy).To(Equal(backupv1.DeletionPolicyRetain))
	g.Expect(got.Status.NextScheduleTime).NotTo(BeNil())
	// 02:00 in Shanghai is 18:00 UTC.
	g.Expect(got.Status.NextScheduleTime.UTC().Hour()).To(Equal(18))
	g.Expect(kstatusOf(g, key)).To(Equal(kstatus.CurrentStatus))

	list := &batchv1.CronJobList{}
	g.Expect(env.Client.List(context.Background(), list, client.InNamespace(ns))).To(Succeed())
	g.Expect(list.Items).To(HaveLen(1))
}

func TestSpecChangesUpdateTheCronJobInPlace(t *testing.T) {
	g := NewWithT(t)
	ns := newNamespace(t)
	bj := create(t, backupJob(ns, "orders"))
	key := client.ObjectKeyFromObject(bj)
	converged(t, key, backupv1.PhaseScheduled)
	uid := cronJob(g, key).UID

	update(t, key, func(bj *backupv1.BackupJob) {
		bj.Spec.Schedule = "*/10 * * * *"
		bj.Spec.TimeZone = "Europe/Berlin"
		bj.Spec.MaxRetries = ptr.To[int32](1)
	})
	g.Eventually(func(g Gomega) {
		cj := cronJob(g, key)
		g.Expect(cj.Spec.Schedule).To(Equal("*/10 * * * *"))
		g.Expect(cj.Spec.TimeZone).To(HaveValue(Equal("Europe/Berlin")))
		g.Expect(cj.Spec.JobTemplate.Spec.BackoffLimit).To(HaveValue(BeEquivalentTo(1)))
		g.Expect(cj.UID).To(Equal(uid), "updated in place, not recreated")
	}).WithTimeout(30 * time.Second).Should(Succeed())

	update(t, key, func(bj *backupv1.BackupJob) { bj.Spec.Suspend = true })
	got := converged(t, key, backupv1.PhaseSuspended)
	g.Expect(got.Status.NextScheduleTime).To(BeNil())
	g.Expect(cronJob(g, key).Spec.Suspend).To(HaveValue(BeTrue()))
}

func TestDriftIsRevertedAndADeletedCronJobRecreated(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	ns := newNamespace(t)
	bj := create(t, backupJob(ns, "orders"))
	key := client.ObjectKeyFromObject(bj)
	converged(t, key, backupv1.PhaseScheduled)

	cj := cronJob(g, key)
	cj.Spec.Schedule = "* * * * *"
	cj.Spec.JobTemplate.Spec.Template.Spec.Containers[0].Image = "evil.example/agent:x"
	g.Expect(env.Client.Update(ctx, cj)).To(Succeed())
	g.Eventually(func(g Gomega) {
		cj := cronJob(g, key)
		g.Expect(cj.Spec.Schedule).To(Equal("0 2 * * *"))
		g.Expect(cj.Spec.JobTemplate.Spec.Template.Spec.Containers[0].Image).To(Equal(agentImage))
	}).WithTimeout(30 * time.Second).Should(Succeed())

	g.Expect(env.Client.Delete(ctx, cj)).To(Succeed())
	g.Eventually(func(g Gomega) {
		again := cronJob(g, key)
		g.Expect(again.UID).NotTo(Equal(cj.UID))
	}).WithTimeout(30 * time.Second).Should(Succeed())
	list := &batchv1.CronJobList{}
	g.Consistently(func(g Gomega) {
		g.Expect(env.Client.List(ctx, list, client.InNamespace(ns))).To(Succeed())
		g.Expect(list.Items).To(HaveLen(1))
	}).WithTimeout(2 * time.Second).Should(Succeed())
}

// The operator keeps CronJobs as metadata in its cache, with a spec hash and
// the generation it last saw matching: an edit of those annotations or of its
// labels is reverted too, and at no point does it list or watch whole
// CronJobs.
func TestCronJobMetadataEditsAreReverted(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	ns := newNamespace(t)
	bj := create(t, backupJob(ns, "orders"))
	key := client.ObjectKeyFromObject(bj)
	converged(t, key, backupv1.PhaseScheduled)
	cj := cronJob(g, key)
	hash := cj.Annotations[controller.SpecHashAnnotation]
	g.Expect(hash).NotTo(BeEmpty())
	g.Expect(cj.Annotations).To(HaveKeyWithValue(controller.SpecGenerationAnnotation, "1"))

	// Annotations gone: the spec still matches, only they come back.
	delete(cj.Annotations, controller.SpecHashAnnotation)
	cj.Annotations[controller.SpecGenerationAnnotation] = "42"
	g.Expect(env.Client.Update(ctx, cj)).To(Succeed())
	g.Eventually(func(g Gomega) {
		got := cronJob(g, key)
		g.Expect(got.Annotations).To(HaveKeyWithValue(controller.SpecHashAnnotation, hash))
		g.Expect(got.Annotations).To(HaveKeyWithValue(controller.SpecGenerationAnnotation, "1"))
		g.Expect(got.Generation).To(BeEquivalentTo(1))
	}).WithTimeout(30 * time.Second).Should(Succeed())

	// A spec edit that leaves the annotations alone: they still name
	// generation 1, the edit makes it 2.
	cj = cronJob(g, key)
	cj.Spec.Schedule = "* * * * *"
	g.Expect(env.Client.Update(ctx, cj)).To(Succeed())
	g.Eventually(func(g Gomega) {
		got := cronJob(g, key)
		g.Expect(got.Spec.Schedule).To(Equal("0 2 * * *"))
		g.Expect(got.Annotations).To(HaveKeyWithValue(controller.SpecGenerationAnnotation, fmt.Sprint(got.Generation)))
	}).WithTimeout(30 * time.Second).Should(Succeed())

	// Our labels removed: the CronJob leaves the operator's cache, which
	// must not make the operator create a second one or give up.
	cj = cronJob(g, key)
	delete(cj.Labels, controller.ManagedByLabel)
	delete(cj.Labels, controller.BackupJobLabel)
	g.Expect(env.Client.Update(ctx, cj)).To(Succeed())
	g.Eventually(func(g Gomega) {
		got := cronJob(g, key)
		g.Expect(got.Labels).To(HaveKeyWithValue(controller.ManagedByLabel, controller.ManagedByValue))
		g.Expect(got.Labels).To(HaveKeyWithValue(controller.BackupJobLabel, "orders"))
		g.Expect(got.UID).To(Equal(cj.UID))
	}).WithTimeout(30 * time.Second).Should(Succeed())
	converged(t, key, backupv1.PhaseScheduled)

	g.Expect(fullCronJobReads.Load()).To(BeZero(), "CronJobs listed or watched as whole objects")
}

func warningEvents(g Gomega, ns, name, reason string) []eventsv1.Event {
	list := &eventsv1.EventList{}
	g.Expect(env.Client.List(context.Background(), list, client.InNamespace(ns))).To(Succeed())
	var out []eventsv1.Event
	for _, e := range list.Items {
		if e.Regarding.Name == name && e.Reason == reason {
			out = append(out, e)
		}
	}
	return out
}

func TestRunsAreRecorded(t *testing.T) {
	g := NewWithT(t)
	ns := newNamespace(t)
	bj := create(t, backupJob(ns, "orders"))
	key := client.ObjectKeyFromObject(bj)
	converged(t, key, backupv1.PhaseScheduled)

	finishRun(t, bj, "orders-1001", true, agentResult("cairn/"+ns+"/orders/a1.pgdump.zst"))
	got := converged(t, key, backupv1.PhaseSucceeded)
	g.Expect(got.Status.LastResult).To(Equal(backupv1.RunSucceeded))
	g.Expect(got.Status.LastArtifact).NotTo(BeNil())
	g.Expect(got.Status.LastArtifact.Path).To(Equal("cairn/" + ns + "/orders/a1.pgdump.zst"))
	g.Expect(got.Status.LastArtifact.Size).To(BeEquivalentTo(2048))
	g.Expect(got.Status.LastSuccessfulTime).NotTo(BeNil())
	g.Expect(got.Status.ConsecutiveFailures).To(BeZero())

	finishRun(t, bj, "orders-1002", false, `{"error":"backup: connecting to orders-db.db.svc:5432: connection refused"}`)
	g.Eventually(func(g Gomega) {
		got = get(g, key)
		g.Expect(got.Status.Phase).To(Equal(backupv1.PhaseFailed))
		g.Expect(got.Status.ConsecutiveFailures).To(BeEquivalentTo(1))
	}).WithTimeout(30 * time.Second).Should(Succeed())
	g.Expect(got.Status.LastFailureTime).NotTo(BeNil())
	g.Expect(got.Status.LastArtifact.Path).To(HaveSuffix("a1.pgdump.zst"), "a failure keeps the last good artifact")
	g.Expect(kstatusOf(g, key)).To(Equal(kstatus.InProgressStatus), "Ready=False after a failed run")
	g.Eventually(func(g Gomega) {
		evs := warningEvents(g, ns, "orders", "BackupFailed")
		g.Expect(evs).To(HaveLen(1))
		g.Expect(evs[0].Type).To(Equal(corev1.EventTypeWarning))
		g.Expect(evs[0].Note).To(ContainSubstring("connection refused"))
	}).WithTimeout(30 * time.Second).Should(Succeed())

	finishRun(t, bj, "orders-1003", false, `{"error":"backup: timeout"}`)
	g.Eventually(func(g Gomega) {
		g.Expect(get(g, key).Status.ConsecutiveFailures).To(BeEquivalentTo(2))
	}).WithTimeout(30 * time.Second).Should(Succeed())

	finishRun(t, bj, "orders-1004", true, agentResult("cairn/"+ns+"/orders/a4.pgdump.zst"))
	g.Eventually(func(g Gomega) {
		got = get(g, key)
		g.Expect(got.Status.Phase).To(Equal(backupv1.PhaseSucceeded))
		g.Expect(got.Status.ConsecutiveFailures).To(BeZero())
		g.Expect(got.Status.LastArtifact.Path).To(HaveSuffix("a4.pgdump.zst"))
	}).WithTimeout(30 * time.Second).Should(Succeed())
	// Each run counted once, however many reconciles saw it.
	g.Consistently(func(g Gomega) {
		g.Expect(get(g, key).Status.ConsecutiveFailures).To(BeZero())
		g.Expect(warningEvents(g, ns, "orders", "BackupFailed")).To(HaveLen(2))
	}).WithTimeout(2 * time.Second).Should(Succeed())
	g.Expect(metricValue(g, "cairn_backupjob_runs_total", ns, "Failed")).To(BeEquivalentTo(2))
	g.Expect(metricValue(g, "cairn_backupjob_runs_total", ns, "Succeeded")).To(BeEquivalentTo(2))
	g.Expect(gauge(g, "cairn_backupjob_consecutive_failures", ns, "orders")).To(BeZero(), "no failures: no series")
	g.Expect(metricValue(g, "cairn_backupjob_last_success_timestamp_seconds", ns, "")).To(BeNumerically(">", 0))
}

func runNowJobs(g Gomega, ns string) []batchv1.Job {
	return testenv.Jobs(g, env.Client, ns, client.MatchingLabels{controller.RunKindLabel: "run-now"})
}

func TestRunNowStartsOneJobPerRequest(t *testing.T) {
	g := NewWithT(t)
	ns := newNamespace(t)
	bj := create(t, backupJob(ns, "orders"))
	key := client.ObjectKeyFromObject(bj)
	converged(t, key, backupv1.PhaseScheduled)

	annotate := func(k, v string) {
		update(t, key, func(bj *backupv1.BackupJob) {
			if bj.Annotations == nil {
				bj.Annotations = map[string]string{}
			}
			bj.Annotations[k] = v
		})
	}
	annotate(backupv1.RunNowAnnotation, "req-1")
	g.Eventually(func(g Gomega) { g.Expect(runNowJobs(g, ns)).To(HaveLen(1)) }).WithTimeout(30 * time.Second).Should(Succeed())
	g.Eventually(func(g Gomega) { g.Expect(get(g, key).Status.LastRunNowRequest).To(Equal("req-1")) }).WithTimeout(30 * time.Second).Should(Succeed())
	// More reconciles of the same request (an unrelated annotation change) start nothing.
	annotate("unrelated", "1")
	annotate("unrelated", "2")
	g.Consistently(func(g Gomega) { g.Expect(runNowJobs(g, ns)).To(HaveLen(1)) }).WithTimeout(2 * time.Second).Should(Succeed())

	// A second request while the first run is active waits for it: two
	// runs of one BackupJob never overlap.
	annotate(backupv1.RunNowAnnotation, "req-2")
	g.Consistently(func(g Gomega) { g.Expect(runNowJobs(g, ns)).To(HaveLen(1)) }).WithTimeout(2 * time.Second).Should(Succeed())
	completeJob(t, &runNowJobs(g, ns)[0])
	g.Eventually(func(g Gomega) { g.Expect(runNowJobs(g, ns)).To(HaveLen(2)) }).WithTimeout(30 * time.Second).Should(Succeed())
	jobs := runNowJobs(g, ns)
	for _, j := range jobs {
		g.Expect(j.Spec.Template.Spec.Containers[0].Args).To(Equal([]string{"backup"}))
		g.Expect(metav1.IsControlledBy(&j, get(g, key))).To(BeTrue())
	}
	// The first run is recorded (after the result grace: it has no pod),
	// so nothing of this test is still moving when the next one starts.
	g.Eventually(func(g Gomega) { g.Expect(get(g, key).Status.LastRunName).NotTo(BeEmpty()) }).WithTimeout(30 * time.Second).Should(Succeed())
}

func TestZeroWritesAtRest(t *testing.T) {
	g := NewWithT(t)
	ns := newNamespace(t)
	bj := create(t, backupJob(ns, "orders"))
	key := client.ObjectKeyFromObject(bj)
	converged(t, key, backupv1.PhaseScheduled)
	// Let the creation's own events settle: the write count stops moving.
	var settled int64
	g.Eventually(func() bool {
		a := writes.Load()
		ok := a == settled
		settled = a
		return ok
	}).WithTimeout(20 * time.Second).WithPolling(500 * time.Millisecond).Should(BeTrue())

	// Force reconciles that observe nothing new: label changes pass the predicate.
	for i := 0; i < 3; i++ {
		update(t, key, func(bj *backupv1.BackupJob) { bj.Labels = map[string]string{"touch": strings.Repeat("x", i+1)} })
	}
	g.Consistently(writes.Load).WithTimeout(3*time.Second).Should(Equal(settled), "a reconcile that observes nothing new must not write")
}

func TestDeletionRetainRemovesChildren(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	ns := newNamespace(t)
	bj := create(t, backupJob(ns, "orders"))
	key := client.ObjectKeyFromObject(bj)
	converged(t, key, backupv1.PhaseScheduled)
	finishRun(t, bj, "orders-2001", true, agentResult("a"))
	converged(t, key, backupv1.PhaseSucceeded)

	g.Expect(env.Client.Delete(ctx, get(g, key))).To(Succeed())
	g.Eventually(func() bool {
		return apierrors.IsNotFound(env.Client.Get(ctx, key, &backupv1.BackupJob{}))
	}).WithTimeout(30 * time.Second).Should(BeTrue())
	g.Expect(apierrors.IsNotFound(env.Client.Get(ctx, key, &batchv1.CronJob{}))).To(BeTrue(), "CronJob left behind")
	for _, j := range testenv.Jobs(g, env.Client, ns) {
		g.Expect(j.DeletionTimestamp).NotTo(BeNil(), "Job %s left behind", j.Name)
	}
}

func deleteJobOf(g Gomega, ns string) *batchv1.Job {
	list := testenv.Jobs(g, env.Client, ns, client.MatchingLabels{controller.RunKindLabel: "delete"})
	g.Expect(list).To(HaveLen(1))
	return &list[0]
}

func TestDeletionPolicyDeleteRunsTheArtifactDeleteJob(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	ns := newNamespace(t)
	bj := backupJob(ns, "orders")
	bj.Spec.DeletionPolicy = backupv1.DeletionPolicyDelete
	create(t, bj)
	key := client.ObjectKeyFromObject(bj)
	converged(t, key, backupv1.PhaseScheduled)
	g.Expect(env.Client.Delete(ctx, get(g, key))).To(Succeed())

	var job *batchv1.Job
	g.Eventually(func(g Gomega) { job = deleteJobOf(g, ns) }).WithTimeout(30 * time.Second).Should(Succeed())
	g.Expect(job.Spec.Template.Spec.Containers[0].Args).To(Equal([]string{"delete"}))
	g.Expect(get(g, key).Status.Phase).To(Equal(backupv1.PhaseDeleting))
	// Still there while the delete Job runs.
	g.Consistently(func() error { return env.Client.Get(ctx, key, &backupv1.BackupJob{}) }).WithTimeout(2 * time.Second).Should(Succeed())

	finishJob(g, job, metav1.Now(), true, "")
	g.Eventually(func() bool {
		return apierrors.IsNotFound(env.Client.Get(ctx, key, &backupv1.BackupJob{}))
	}).WithTimeout(30 * time.Second).Should(BeTrue())
}

func TestUnreachableStoreEscapeHatch(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	ns := newNamespace(t)
	bj := backupJob(ns, "orders")
	bj.Spec.DeletionPolicy = backupv1.DeletionPolicyDelete
	create(t, bj)
	key := client.ObjectKeyFromObject(bj)
	converged(t, key, backupv1.PhaseScheduled)
	g.Expect(env.Client.Delete(ctx, get(g, key))).To(Succeed())

	var job *batchv1.Job
	g.Eventually(func(g Gomega) { job = deleteJobOf(g, ns) }).WithTimeout(30 * time.Second).Should(Succeed())
	finishJob(g, job, metav1.Now(), false, "store unreachable")
	g.Eventually(func(g Gomega) {
		c := get(g, key).Status.Conditions
		g.Expect(c).To(ContainElement(And(
			HaveField("Type", cairnv1.ReconcilingCondition),
			HaveField("Message", ContainSubstring("failed")))))
	}).WithTimeout(30 * time.Second).Should(Succeed())
	g.Consistently(func() error { return env.Client.Get(ctx, key, &backupv1.BackupJob{}) }).WithTimeout(2 * time.Second).Should(Succeed())

	// The escape hatch: the finalizer goes, and an Event says what is left.
	update(t, key, func(bj *backupv1.BackupJob) {
		bj.Annotations = map[string]string{finalizer.SkipCleanupAnnotation: "true"}
	})
	g.Eventually(func() bool {
		return apierrors.IsNotFound(env.Client.Get(ctx, key, &backupv1.BackupJob{}))
	}).WithTimeout(30 * time.Second).Should(BeTrue())
	g.Eventually(func(g Gomega) {
		evs := warningEvents(g, ns, "orders", finalizer.CleanupSkippedReason)
		g.Expect(evs).To(HaveLen(1))
		g.Expect(evs[0].Note).To(ContainSubstring("s3://backups"))
	}).WithTimeout(30 * time.Second).Should(Succeed())
}

func TestInvalidSpecIsRejectedAtAdmission(t *testing.T) {
	g := NewWithT(t)
	ns := newNamespace(t)
	cases := map[string]struct {
		mut  func(*backupv1.BackupJob)
		want string
	}{
		"six fields":     {func(b *backupv1.BackupJob) { b.Spec.Schedule = "0 0 2 * * *" }, "spec.schedule"},
		"CRON_TZ prefix": {func(b *backupv1.BackupJob) { b.Spec.Schedule = "CRON_TZ=UTC 0 2 * * *" }, "timeZone"},
		"unknown zone":   {func(b *backupv1.BackupJob) { b.Spec.TimeZone = "Mars/Base" }, "spec.timeZone"},
		"both stores": {func(b *backupv1.BackupJob) {
			b.Spec.Storage.PVC = &cairnv1.PVCStorage{ClaimName: "x"}
		}, "exactly one"},
		"retention 0":   {func(b *backupv1.BackupJob) { b.Spec.RetentionDays = -1 }, "retentionDays"},
		"name too long": {func(b *backupv1.BackupJob) { b.Name = strings.Repeat("a", 53) }, "52"},
	}
	for name, c := range cases {
		bj := backupJob(ns, "bad")
		c.mut(bj)
		err := env.Client.Create(context.Background(), bj)
		g.Expect(err).To(HaveOccurred(), name)
		g.Expect(err.Error()).To(ContainSubstring(c.want), name)
	}
}

// metricValue reads a per-BackupJob metric of the "orders" BackupJob in ns
// from controller-runtime's registry (result "" matches any).
func metricValue(g Gomega, name, ns, result string) float64 {
	mfs, err := crmetrics.Registry.Gather()
	g.Expect(err).NotTo(HaveOccurred())
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
		for _, m := range mf.GetMetric() {
			l := map[string]string{}
			for _, p := range m.GetLabel() {
				l[p.GetName()] = p.GetValue()
			}
			if l["namespace"] != ns || l["name"] != "orders" || (result != "" && l["result"] != result) {
				continue
			}
			if m.GetCounter() != nil {
				return m.GetCounter().GetValue()
			}
			return m.GetGauge().GetValue()
		}
	}
	g.Expect(name).To(BeEmpty(), "metric %s for %s/orders not found", name, ns)
	return 0
}

// completeJob marks a Job complete, as the Job controller would.
// Job times have a one-second resolution: a run that ends in the same
// second as one already recorded, but is seen a pass later and sorts
// before it by name (a scheduled run "orders-<minute>" after a run-now
// "orders-now-…"), is recorded and reported too — once.
func TestRunsEndingInTheSameSecondAreEachRecorded(t *testing.T) {
	g := NewWithT(t)
	ns := newNamespace(t)
	bj := create(t, backupJob(ns, "orders"))
	key := client.ObjectKeyFromObject(bj)
	converged(t, key, backupv1.PhaseScheduled)

	end := metav1.NewTime(time.Now().Add(-30 * time.Second).Truncate(time.Second))
	finishRunAt(t, bj, "orders-now-zz", true, agentResult("cairn/"+ns+"/orders/now.pgdump.zst"), end)
	g.Eventually(func(g Gomega) {
		g.Expect(get(g, key).Status.LastRunName).To(Equal("orders-now-zz"))
	}).WithTimeout(30 * time.Second).Should(Succeed())

	finishRunAt(t, bj, "orders-1001", false, `{"error":"backup: timeout"}`, end)
	g.Eventually(func(g Gomega) {
		got := get(g, key)
		g.Expect(got.Status.LastRunName).To(Equal("orders-1001"))
		g.Expect(got.Status.RunsAtLastBackupTime).To(ConsistOf("orders-now-zz", "orders-1001"))
		g.Expect(got.Status.ConsecutiveFailures).To(BeEquivalentTo(1))
	}).WithTimeout(30 * time.Second).Should(Succeed())
	reported := func(g Gomega, reason string) []string {
		var related []string
		for _, e := range warningEvents(g, ns, "orders", reason) {
			if e.Related != nil {
				related = append(related, e.Related.Name)
			}
		}
		return related
	}
	each := func(g Gomega) {
		g.Expect(reported(g, "BackupSucceeded")).To(ConsistOf("orders-now-zz"))
		g.Expect(reported(g, "BackupFailed")).To(ConsistOf("orders-1001"))
		g.Expect(get(g, key).Status.ConsecutiveFailures).To(BeEquivalentTo(1), "each run counted once")
	}
	// Events are written a moment after the status: each one once, then
	// no more.
	g.Eventually(each).WithTimeout(30 * time.Second).Should(Succeed())
	g.Consistently(each).WithTimeout(2 * time.Second).Should(Succeed())
}

func completeJob(t *testing.T, job *batchv1.Job) {
	t.Helper()
	finishJob(NewWithT(t), job, metav1.Now(), true, "")
}

func TestRunNowWaitsWhileSuspended(t *testing.T) {
	g := NewWithT(t)
	ns := newNamespace(t)
	b := backupJob(ns, "paused")
	b.Spec.Suspend = true
	bj := create(t, b)
	key := client.ObjectKeyFromObject(bj)
	converged(t, key, backupv1.PhaseSuspended)
	update(t, key, func(bj *backupv1.BackupJob) {
		bj.Annotations = map[string]string{backupv1.RunNowAnnotation: "now"}
	})
	g.Eventually(func(g Gomega) {
		c := meta.FindStatusCondition(get(g, key).Status.Conditions, cairnv1.ReadyCondition)
		g.Expect(c).NotTo(BeNil())
		g.Expect(c.Message).To(ContainSubstring(`run-now request "now" starts when spec.suspend is false`))
	}).WithTimeout(30 * time.Second).Should(Succeed())
	g.Consistently(func(g Gomega) { g.Expect(runNowJobs(g, ns)).To(BeEmpty()) }).WithTimeout(2 * time.Second).Should(Succeed())
	update(t, key, func(bj *backupv1.BackupJob) { bj.Spec.Suspend = false })
	g.Eventually(func(g Gomega) { g.Expect(runNowJobs(g, ns)).To(HaveLen(1)) }).WithTimeout(30 * time.Second).Should(Succeed())
}

// A BackupJob whose credentials Secret is missing, or lacks a key, is
// Stalled with a message naming the Secret and the key, with one Warning
// Event; its CronJob is suspended; it recovers by itself when the Secret is
// fixed.
func TestMissingReferenceIsReportedAndRecovers(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	ns := newNamespace(t)
	b := backupJob(ns, "norefs")
	b.Spec.Database.CredentialsSecretRef.Name = "later-credentials"
	bj := create(t, b)
	key := client.ObjectKeyFromObject(bj)
	stalledWith := func(reason, text string) {
		g.Eventually(func(g Gomega) {
			got := get(g, key)
			c := meta.FindStatusCondition(got.Status.Conditions, cairnv1.StalledCondition)
			g.Expect(c).NotTo(BeNil())
			g.Expect(c.Reason).To(Equal(reason))
			g.Expect(c.Message).To(ContainSubstring(text))
			g.Expect(got.Status.Phase).To(Equal(backupv1.PhasePending))
		}).WithTimeout(30 * time.Second).Should(Succeed())
	}
	stalledWith(cairnv1.ReferenceNotFoundReason, "Secret "+ns+"/later-credentials (spec.database.credentialsSecretRef) not found")
	g.Expect(env.Client.Get(ctx, key, &batchv1.CronJob{})).NotTo(Succeed(), "no CronJob while a reference is missing")

	g.Expect(env.Client.Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "later-credentials"},
		StringData: map[string]string{"username": "app"}})).To(Succeed())
	stalledWith(cairnv1.ReferenceKeyMissingReason, "has no key password")

	s := &corev1.Secret{}
	g.Expect(env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: "later-credentials"}, s)).To(Succeed())
	s.StringData = map[string]string{"password": "pw"}
	g.Expect(env.Client.Update(ctx, s)).To(Succeed())
	converged(t, key, backupv1.PhaseScheduled)
	g.Expect(*cronJob(g, key).Spec.Suspend).To(BeFalse())

	// The Secret goes away again: the CronJob is suspended, no run starts.
	g.Expect(env.Client.Delete(ctx, s)).To(Succeed())
	stalledWith(cairnv1.ReferenceNotFoundReason, "later-credentials")
	g.Eventually(func(g Gomega) { g.Expect(*cronJob(g, key).Spec.Suspend).To(BeTrue()) }).WithTimeout(30 * time.Second).Should(Succeed())
	g.Eventually(func(g Gomega) {
		g.Expect(warningEvents(g, ns, "norefs", cairnv1.ReferenceNotFoundReason)).To(HaveLen(2), "one Warning per time it went missing")
		g.Expect(warningEvents(g, ns, "norefs", cairnv1.ReferenceKeyMissingReason)).To(HaveLen(1))
	}).WithTimeout(30 * time.Second).Should(Succeed())
}

// The gauges users alert on are set from status on every reconcile: after
// an operator restart (metrics gone) the next reconcile brings them back.
func TestAlertGaugesComeBackFromStatus(t *testing.T) {
	g := NewWithT(t)
	ns := newNamespace(t)
	bj := create(t, backupJob(ns, "gauges"))
	key := client.ObjectKeyFromObject(bj)
	converged(t, key, backupv1.PhaseScheduled)
	interval := func() float64 { return gauge(g, "cairn_backupjob_schedule_interval_seconds", ns, "gauges") }
	g.Expect(interval()).To(BeZero(), "no run yet: no interval series (nothing reads it without a run's series)")
	finishRun(t, bj, "gauges-1", true, agentResult("cairn/"+ns+"/gauges/a1.pgdump.zst"))
	converged(t, key, backupv1.PhaseSucceeded)
	lastSuccess := func() float64 { return gauge(g, "cairn_backupjob_last_success_timestamp_seconds", ns, "gauges") }
	g.Eventually(lastSuccess).WithTimeout(10 * time.Second).Should(BeNumerically(">", 0))
	g.Eventually(interval).WithTimeout(10 * time.Second).Should(BeNumerically(">", 0))
	controller.ForgetMetrics(ns, "gauges")
	g.Expect(lastSuccess()).To(BeZero())
	g.Expect(interval()).To(BeZero())
	update(t, key, func(bj *backupv1.BackupJob) { bj.Labels = map[string]string{"wake": "up"} })
	g.Eventually(lastSuccess).WithTimeout(30 * time.Second).Should(BeNumerically(">", 0))
	g.Eventually(interval).WithTimeout(30 * time.Second).Should(BeNumerically(">", 0))
}

// gauge reads a per-BackupJob gauge; 0 when the series does not exist.
func gauge(g Gomega, metric, ns, name string) float64 {
	mfs, err := crmetrics.Registry.Gather()
	g.Expect(err).NotTo(HaveOccurred())
	for _, mf := range mfs {
		if mf.GetName() != metric {
			continue
		}
		for _, m := range mf.GetMetric() {
			l := map[string]string{}
			for _, p := range m.GetLabel() {
				l[p.GetName()] = p.GetValue()
			}
			if l["namespace"] == ns && l["name"] == name {
				return m.GetGauge().GetValue()
			}
		}
	}
	return 0
}

// Finished run-now Jobs beyond the newest three are deleted once recorded;
// a Job that only carries the BackupJob's label, controlled by nobody, is
// not a run of it (never recorded, never deleted).
func TestRunNowHistoryAndRunsByOwner(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	ns := newNamespace(t)
	bj := create(t, backupJob(ns, "orders"))
	key := client.ObjectKeyFromObject(bj)
	converged(t, key, backupv1.PhaseScheduled)

	stray := &batchv1.Job{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "stray",
		Labels: map[string]string{controller.BackupJobLabel: "orders", controller.RunKindLabel: "run-now"}},
		Spec: batchv1.JobSpec{Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{RestartPolicy: corev1.RestartPolicyNever,
			Containers: []corev1.Container{{Name: "x", Image: "x"}}}}}}
	g.Expect(env.Client.Create(ctx, stray)).To(Succeed())
	completeJob(t, stray)

	for i := 1; i <= 5; i++ {
		req := fmt.Sprintf("req-%d", i)
		update(t, key, func(bj *backupv1.BackupJob) {
			bj.Annotations = map[string]string{backupv1.RunNowAnnotation: req}
		})
		var job batchv1.Job
		g.Eventually(func(g Gomega) {
			for _, j := range runNowJobs(g, ns) {
				if j.Annotations[backupv1.RunNowAnnotation] == req {
					job = j
					return
				}
			}
			g.Expect(req).To(BeEmpty(), "no Job for "+req)
		}).WithTimeout(30 * time.Second).Should(Succeed())
		completeJob(t, &job)
		g.Eventually(func(g Gomega) { g.Expect(get(g, key).Status.LastRunName).To(Equal(job.Name)) }).WithTimeout(30 * time.Second).Should(Succeed())
	}
	g.Eventually(func(g Gomega) {
		var mine []string
		for _, j := range runNowJobs(g, ns) {
			if j.Name != "stray" && j.DeletionTimestamp.IsZero() {
				mine = append(mine, j.Annotations[backupv1.RunNowAnnotation])
			}
		}
		g.Expect(mine).To(ConsistOf("req-3", "req-4", "req-5"))
	}).WithTimeout(30 * time.Second).Should(Succeed())
	g.Expect(env.Client.Get(ctx, client.ObjectKeyFromObject(stray), &batchv1.Job{})).To(Succeed(), "a Job that is not the BackupJob's is left alone")
	g.Expect(get(g, key).Status.LastRunName).NotTo(Equal("stray"))
}
