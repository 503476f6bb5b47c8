package backup_test

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"
	_ "time/tzdata" // Asia/Shanghai without the system's zoneinfo

	. "github.com/onsi/gomega"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	backupv1 "cairn.dev/apis/backup/v1"
	cairnv1 "cairn.dev/apis/meta/v1"
	restorev1 "cairn.dev/apis/restore/v1"
	"cairn.dev/e2e/cluster"
	"cairn.dev/e2e/fixtures"
)

// The CronJob fires on its schedule in its time zone, the Job completes, and
// the BackupJob's status records the run with the agent's artifact and moves
// nextScheduleTime on. The schedule is a daily one at the Asia/Shanghai wall
// clock of a minute about a minute ahead: read as UTC (or any other zone) it
// would be hours away, so only a schedule evaluated in the BackupJob's time
// zone fires during the test.
func TestScheduledRunInTimeZone(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	shanghai, err := time.LoadLocation("Asia/Shanghai")
	g.Expect(err).NotTo(HaveOccurred())
	ns := namespace(t)
	// The CronJob must exist before the minute it fires at.
	fireAt := time.Now().Add(45 * time.Second).Truncate(time.Minute).Add(time.Minute)
	local := fireAt.In(shanghai)
	schedule := fmt.Sprintf("%d %d * * *", local.Minute(), local.Hour())
	bj := backupJob(ns, "nightly", schedule, dbHost, 1)
	created := time.Now()
	g.Expect(env.Client.Create(ctx, bj)).To(Succeed())
	t.Logf("schedule %q in Asia/Shanghai: due at %s (%s UTC)", schedule, local.Format("15:04"), fireAt.UTC().Format("15:04"))

	cj := &batchv1.CronJob{}
	g.Eventually(func() error { return env.Client.Get(ctx, client.ObjectKeyFromObject(bj), cj) }).
		WithTimeout(30 * time.Second).Should(Succeed())
	g.Expect(cj.Spec.Schedule).To(Equal(schedule))
	g.Expect(ptr.Deref(cj.Spec.TimeZone, "")).To(Equal("Asia/Shanghai"))
	g.Expect(metav1.IsControlledBy(cj, mustGet(g, bj))).To(BeTrue(), "the CronJob is controlled by the BackupJob")
	g.Expect(cj.CreationTimestamp.Time).To(BeTemporally("<", fireAt), "the CronJob exists before its first run is due")

	nextRun := func() time.Time {
		n := get(g, bj)().NextScheduleTime
		if n == nil {
			return time.Time{}
		}
		return n.Time
	}
	g.Eventually(nextRun).WithTimeout(30*time.Second).Should(BeTemporally("==", fireAt), "nextScheduleTime in Asia/Shanghai")

	// The run fires at fireAt, within about two minutes of creation.
	var st backupv1.BackupJobStatus
	g.Eventually(func() backupv1.RunResult { st = get(g, bj)(); return st.LastResult }).
		WithTimeout(150 * time.Second).WithPolling(time.Second).Should(Equal(backupv1.RunSucceeded))
	t.Logf("first scheduled run recorded %s after the BackupJob was created", time.Since(created).Round(time.Second))
	g.Expect(st.LastSuccessfulTime).NotTo(BeNil())
	g.Expect(st.ConsecutiveFailures).To(BeZero())
	g.Expect(st.LastArtifact).NotTo(BeNil(), "the artifact from the agent's termination message")
	g.Expect(st.LastArtifact.Path).To(HavePrefix(ns+"/"+ns+"/nightly/"), "prefix, then the BackupJob's folder in the store")
	g.Expect(st.LastArtifact.Checksum).To(HavePrefix("sha256:"))
	g.Expect(st.LastArtifact.Size).To(BeNumerically(">", 0))

	// The run was the CronJob's, scheduled for fireAt.
	jobs := jobsOf(g, bj, client.MatchingLabels{"backup.cairn.dev/run": "scheduled"})
	g.Expect(jobs).To(HaveLen(1))
	ran := jobs[0]
	g.Expect(ran.Name).To(Equal(st.LastRunName))
	g.Expect(metav1.IsControlledBy(&ran, cj)).To(BeTrue())
	scheduled, err := time.Parse(time.RFC3339, ran.Annotations["batch.kubernetes.io/cronjob-scheduled-timestamp"])
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(scheduled).To(BeTemporally("==", fireAt), "fired at the Asia/Shanghai minute")
	g.Expect(ran.CreationTimestamp.Sub(scheduled)).To(BeNumerically("<", 30*time.Second), "fired on time")
	g.Expect(ran.Status.Succeeded).To(BeEquivalentTo(1))

	// nextScheduleTime moves to the same wall-clock minute the next day.
	g.Eventually(nextRun).WithTimeout(30 * time.Second).Should(BeTemporally("==", local.AddDate(0, 0, 1)))
}

// A failing run is retried maxRetries times by the Job controller, then the
// BackupJob shows Failed with a Warning Event; a later success clears it.
func TestFailingRunIsRetriedThenFailed(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	ns := namespace(t)
	const maxRetries = 2
	bj := backupJob(ns, "broken", yearly, cluster.FailHost, maxRetries)
	g.Expect(env.Client.Create(ctx, bj)).To(Succeed())
	setRunNow(t, bj, "first")

	var job batchv1.Job
	g.Eventually(func() []batchv1.Job { return jobsOf(g, bj, nil) }).WithTimeout(30 * time.Second).Should(HaveLen(1))
	// The Job controller's backoff is 10 s, 20 s: about 40 s for three pods.
	g.Eventually(func() bool {
		job = jobsOf(g, bj, nil)[0]
		return fixtures.JobHas(job, batchv1.JobFailed)
	}).WithTimeout(3 * time.Minute).WithPolling(time.Second).Should(BeTrue())
	g.Expect(job.Status.Failed).To(BeEquivalentTo(maxRetries+1), "one run and maxRetries retries")
	g.Expect(ptr.Deref(job.Spec.BackoffLimit, -1)).To(BeEquivalentTo(maxRetries))

	pods := &corev1.PodList{}
	g.Expect(env.Client.List(ctx, pods, client.InNamespace(ns), client.MatchingLabels{"batch.kubernetes.io/job-name": job.Name})).To(Succeed())
	failed := 0
	for _, p := range pods.Items {
		if p.Status.Phase == corev1.PodFailed {
			failed++
			g.Expect(p.Status.ContainerStatuses[0].State.Terminated.ExitCode).To(BeEquivalentTo(1))
		}
	}
	g.Expect(failed).To(Equal(maxRetries+1), "each retry was a pod of its own that failed")

	var st backupv1.BackupJobStatus
	g.Eventually(func() backupv1.RunResult { st = get(g, bj)(); return st.LastResult }).
		WithTimeout(30 * time.Second).Should(Equal(backupv1.RunFailed))
	g.Expect(st.Phase).To(Equal(backupv1.PhaseFailed))
	g.Expect(st.ConsecutiveFailures).To(BeEquivalentTo(1))
	g.Expect(st.LastFailureTime).NotTo(BeNil())
	g.Expect(st.LastSuccessfulTime).To(BeNil())

	g.Eventually(func() []string {
		evs := &corev1.EventList{}
		g.Expect(env.Client.List(ctx, evs, client.InNamespace(ns))).To(Succeed())
		var reasons []string
		for _, e := range evs.Items {
			if e.InvolvedObject.Name == bj.Name && e.InvolvedObject.Kind == "BackupJob" && e.Type == corev1.EventTypeWarning {
				reasons = append(reasons, e.Reason)
			}
		}
		return reasons
	}).WithTimeout(30 * time.Second).Should(ContainElement("BackupFailed"))

	// A later success clears the failure: fix the host, run again.
	g.Eventually(func() error {
		got := mustGet(g, bj)
		got.Spec.Database.Host = dbHost
		return env.Client.Update(ctx, got)
	}).WithTimeout(30 * time.Second).Should(Succeed())
	setRunNow(t, bj, "after-fix")
	g.Eventually(func() backupv1.BackupJobStatus { return get(g, bj)() }).WithTimeout(time.Minute).Should(And(
		HaveField("LastResult", backupv1.RunSucceeded),
		HaveField("ConsecutiveFailures", BeEquivalentTo(0)),
		HaveField("Phase", backupv1.PhaseSucceeded),
		HaveField("LastSuccessfulTime", Not(BeNil())),
	))
	g.Expect(jobsOf(g, bj, nil)).To(HaveLen(2))
}

// Each run-now request starts exactly one Job, however often the BackupJob is
// reconciled.
func TestRunNowStartsOneJobPerRequest(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	ns := namespace(t)
	bj := backupJob(ns, "ondemand", yearly, dbHost, 1)
	g.Expect(env.Client.Create(ctx, bj)).To(Succeed())
	runNow := client.MatchingLabels{"backup.cairn.dev/run": "run-now"}

	setRunNow(t, bj, "req-1")
	g.Eventually(func() []batchv1.Job { return jobsOf(g, bj, runNow) }).WithTimeout(30 * time.Second).Should(HaveLen(1))
	// More reconciles (label changes) for the same request start nothing.
	for i := range 3 {
		g.Eventually(func() error {
			got := mustGet(g, bj)
			if got.Labels == nil {
				got.Labels = map[string]string{}
			}
			got.Labels["touch"] = strconv.Itoa(i)
			return env.Client.Update(ctx, got)
		}).WithTimeout(10*time.Second).Should(Succeed(), "a label update (retried on conflicts with the operator's writes)")
	}
	g.Consistently(func() []batchv1.Job { return jobsOf(g, bj, runNow) }).WithTimeout(5 * time.Second).Should(HaveLen(1))
	g.Eventually(func() backupv1.RunResult { return get(g, bj)().LastResult }).WithTimeout(time.Minute).Should(Equal(backupv1.RunSucceeded))

	setRunNow(t, bj, "req-2")
	g.Eventually(func() []batchv1.Job { return jobsOf(g, bj, runNow) }).WithTimeout(30 * time.Second).Should(HaveLen(2))
	g.Consistently(func() []batchv1.Job { return jobsOf(g, bj, runNow) }).WithTimeout(5 * time.Second).Should(HaveLen(2))
	g.Expect(get(g, bj)().LastRunNowRequest).To(Equal("req-2"))
	g.Expect(jobsOf(g, bj, client.MatchingLabels{"backup.cairn.dev/run": "scheduled"})).To(BeEmpty(), "the yearly schedule did not fire")
}

// Deleting a BackupJob leaves no CronJob, Job or Pod behind.
func TestDeletionLeavesNothingBehind(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	ns := namespace(t)
	bj := backupJob(ns, "doomed", yearly, dbHost, 1)
	g.Expect(env.Client.Create(ctx, bj)).To(Succeed())
	setRunNow(t, bj, "before-delete")
	g.Eventually(func() backupv1.RunResult { return get(g, bj)().LastResult }).WithTimeout(time.Minute).Should(Equal(backupv1.RunSucceeded))
	g.Expect(mustGet(g, bj).Finalizers).NotTo(BeEmpty())
	sel := client.MatchingLabels{"backup.cairn.dev/backupjob": bj.Name}
	g.Expect(count(g, ns, &corev1.PodList{}, sel)).To(BeNumerically(">", 0), "the run left its pod, to be collected")

	g.Expect(env.Client.Delete(ctx, bj)).To(Succeed())
	g.Eventually(func() bool {
		return apierrors.IsNotFound(env.Client.Get(ctx, client.ObjectKeyFromObject(bj), &backupv1.BackupJob{}))
	}).WithTimeout(time.Minute).Should(BeTrue(), "the finalizer is removed")
	g.Eventually(func() []int {
		return []int{count(g, ns, &batchv1.CronJobList{}, nil), count(g, ns, &batchv1.JobList{}, nil), count(g, ns, &corev1.PodList{}, nil)}
	}).WithTimeout(time.Minute).Should(Equal([]int{0, 0, 0}), "CronJobs, Jobs, Pods left in the namespace")
}

// A RestoreJob from a BackupJob restores its newest artifact.
func TestRestoreFromBackupJob(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	ns := namespace(t)
	bj := backupJob(ns, "source", yearly, dbHost, 1)
	g.Expect(env.Client.Create(ctx, bj)).To(Succeed())
	setRunNow(t, bj, "for-restore")
	var st backupv1.BackupJobStatus
	g.Eventually(func() *cairnv1.Artifact { st = get(g, bj)(); return st.LastArtifact }).WithTimeout(time.Minute).ShouldNot(BeNil())

	rj := &restorev1.RestoreJob{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "restore"},
		Spec: restorev1.RestoreJobSpec{
			Source: restorev1.RestoreSource{BackupJob: &restorev1.BackupJobSource{Name: bj.Name}},
			Target: cairnv1.DatabaseRef{Engine: "postgres", Host: dbHost, Port: int32(env.Servers.Postgres.Port), Database: strings.ReplaceAll(ns, "-", "_") + "_restored",
				CredentialsSecretRef: cairnv1.LocalObjectReference{Name: "db"}},
			MaxRetries:            ptr.To[int32](1),
			ActiveDeadlineSeconds: ptr.To[int64](600),
		},
	}
	g.Expect(env.Client.Create(ctx, rj)).To(Succeed())
	got := &restorev1.RestoreJob{}
	g.Eventually(func() restorev1.Phase {
		g.Expect(env.Client.Get(ctx, client.ObjectKeyFromObject(rj), got)).To(Succeed())
		return got.Status.Phase
	}).WithTimeout(time.Minute).Should(Equal(restorev1.PhaseSucceeded))
	g.Expect(got.Status.Artifact).NotTo(BeNil())
	g.Expect(got.Status.Artifact.Path).To(Equal(st.LastArtifact.Path))
	g.Expect(strings.TrimPrefix(got.Status.Artifact.Checksum, "sha256:")).To(HaveLen(64))
}

func count(g Gomega, ns string, list client.ObjectList, sel client.MatchingLabels) int {
	opts := []client.ListOption{client.InNamespace(ns)}
	if sel != nil {
		opts = append(opts, sel)
	}
	g.Expect(env.Client.List(context.Background(), list, opts...)).To(Succeed())
	return apimeta.LenList(list)
}
