package controller_test

import (
	"context"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	"cairn.dev/agent/contract"
	restorev1 "cairn.dev/apis/restore/v1"
	"cairn.dev/libs/testing/testenv"
	"cairn.dev/operators/restore/internal/controller"
)

// runningPod makes the pod the Job controller would make from job's
// template (its labels and finalizers), with the agent container running.
// It is bound to no node, so once released its deletion completes here.
func runningPod(t *testing.T, job *batchv1.Job) *corev1.Pod {
	t.Helper()
	g := NewWithT(t)
	ctx := context.Background()
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{
			Namespace: job.Namespace, Name: job.Name + "-a1", Labels: job.Spec.Template.Labels,
			Finalizers: job.Spec.Template.Finalizers,
			OwnerReferences: []metav1.OwnerReference{{APIVersion: "batch/v1", Kind: "Job", Name: job.Name, UID: job.UID,
				Controller: ptr.To(true), BlockOwnerDeletion: ptr.To(true)}},
		},
		Spec: *job.Spec.Template.Spec.DeepCopy(),
	}
	g.Expect(env.Client.Create(ctx, pod)).To(Succeed())
	pod.Status = corev1.PodStatus{Phase: corev1.PodRunning, ContainerStatuses: []corev1.ContainerStatus{{
		Name: "agent", Image: pod.Spec.Containers[0].Image, ImageID: "sha256:abc", ContainerID: "containerd://abc",
		State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{StartedAt: metav1.Now()}},
	}}}
	g.Expect(env.Client.Status().Update(ctx, pod)).To(Succeed())
	return pod
}

// stopped makes pod's agent exit with message (the kubelet's report after
// it stopped the container).
func stopped(g Gomega, pod *corev1.Pod, message string) {
	ctx := context.Background()
	g.Expect(env.Client.Get(ctx, client.ObjectKeyFromObject(pod), pod)).To(Succeed())
	pod.Status.Phase = corev1.PodFailed
	pod.Status.ContainerStatuses[0].State = corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{
		ExitCode: 1, Reason: "Error", Message: message, StartedAt: metav1.Now(), FinishedAt: metav1.Now()}}
	g.Expect(env.Client.Status().Update(ctx, pod)).To(Succeed())
}

// namespaceEventsOf are the Events about namespace ns (kept in "default")
// with reason, as "type: note".
func namespaceEventsOf(g Gomega, ns, reason string) []string {
	list := &eventsv1.EventList{}
	g.Expect(env.Client.List(context.Background(), list, client.InNamespace(metav1.NamespaceDefault))).To(Succeed())
	var out []string
	for _, e := range list.Items {
		if e.Regarding.Kind == "Namespace" && e.Regarding.Name == ns && e.Reason == reason {
			out = append(out, e.Type+": "+e.Note)
		}
	}
	return out
}

// A verification restore (dropTargetAfterChecks) stopped by its
// namespace's deletion (issue 30): its pod carries the operator's
// finalizer from the Job's template, so the agent's last word — it dropped
// the scratch database it created, or could not, or said nothing — is
// still there after the pod was deleted; the RestoreJob waits for it,
// reports it on the Namespace (Events in it are refused), releases the
// pod and goes. Before, nothing said what became of the database.
func TestStoppedVerificationReportsItsScratchDatabase(t *testing.T) {
	startOperator(t, operatorOptions{})
	for _, c := range []struct {
		name, message, reason, typ, note string
	}{
		{"dropped", string(contract.FailureLine(`restore failed: context canceled; `+contract.ScratchDropped+` (database "orders_verify")`, contract.CodeScratchDropped)),
			controller.ScratchDroppedReason, corev1.EventTypeNormal, "dropped the scratch database"},
		{"not-dropped", string(contract.FailureLine(`restore failed: context canceled; `+contract.ScratchNotDropped+` (database "orders_verify"): connection refused`, contract.CodeScratchNotDropped)),
			controller.ScratchLeftReason, corev1.EventTypeWarning, "could NOT drop the scratch database"},
		{"silent", "", controller.ScratchLeftReason, corev1.EventTypeWarning, "stopped without a report"},
	} {
		t.Run(c.name, func(t *testing.T) {
			g := NewWithT(t)
			ctx := context.Background()
			ns := namespace(t)
			newest := artifactOf("orders-db", "20260102T030405.123Z")
			createBackupJob(t, ns, "orders-db", sourceDB(), &newest)
			rj := checkedRestoreJob(ns, "verify", []restorev1.Check{{Name: "row-counts", RowCountsMatchBackup: true}})
			g.Expect(env.Client.Create(ctx, rj)).To(Succeed())
			job := waitForJob(t, rj)
			g.Expect(job.Spec.Template.Finalizers).To(ContainElement(controller.ScratchReportFinalizer))
			pod := runningPod(t, job)
			g.Eventually(func(g Gomega) { g.Expect(current(g, rj).Status.StartTime).NotTo(BeNil()) }).WithTimeout(30 * time.Second).Should(Succeed())

			// The namespace controller's sweep: the namespace refuses new
			// objects, the RestoreJob and the pod are deleted.
			env.TerminateNamespace(t, ns)
			g.Expect(env.Client.Delete(ctx, current(g, rj))).To(Succeed())
			g.Expect(env.Client.Delete(ctx, pod.DeepCopy())).To(Succeed())
			// While the agent is being stopped, the RestoreJob waits for its word.
			g.Consistently(func() error { return env.Client.Get(ctx, client.ObjectKeyFromObject(rj), &restorev1.RestoreJob{}) }).
				WithTimeout(3 * time.Second).Should(Succeed())
			stopped(g, pod, c.message)

			g.Eventually(testenv.Gone(env.Client, rj)).WithTimeout(30 * time.Second).Should(BeTrue())
			g.Eventually(testenv.Gone(env.Client, pod)).WithTimeout(30*time.Second).Should(BeTrue(), "the pod is still held")
			g.Eventually(func(g Gomega) {
				g.Expect(namespaceEventsOf(g, ns, c.reason)).To(ContainElement(And(
					HavePrefix(c.typ+": RestoreJob "+ns+"/verify: "), ContainSubstring(c.note), ContainSubstring(`"orders_verify"`))))
			}).WithTimeout(30 * time.Second).Should(Succeed())
		})
	}
}

// A verification restore's pods are released once its RestoreJob recorded
// their outcome (it finished), so none stays Terminating because of Cairn.
func TestFinishedVerificationReleasesItsPods(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	startOperator(t, operatorOptions{})
	ns := namespace(t)
	newest := artifactOf("orders-db", "20260102T030405.123Z")
	createBackupJob(t, ns, "orders-db", sourceDB(), &newest)
	rj := checkedRestoreJob(ns, "verify", []restorev1.Check{{Name: "row-counts", RowCountsMatchBackup: true}})
	g.Expect(env.Client.Create(ctx, rj)).To(Succeed())
	job := waitForJob(t, rj)
	pod := runningPod(t, job)
	g.Consistently(func(g Gomega) {
		g.Expect(env.Client.Get(ctx, client.ObjectKeyFromObject(pod), pod)).To(Succeed())
		g.Expect(pod.Finalizers).To(ContainElement(controller.ScratchReportFinalizer))
	}).WithTimeout(2 * time.Second).Should(Succeed())
	stopped(g, pod, agentReport(t, newest, []contract.CheckResult{{Name: "row-counts", Passed: true}}, true, true, ""))
	testenv.UpdateJobStatus(t, env.Client, job, func(s *batchv1.JobStatus) {
		now := metav1.Now()
		s.StartTime, s.CompletionTime, s.Succeeded = &now, &now, 1
		s.Conditions = []batchv1.JobCondition{
			{Type: batchv1.JobSuccessCriteriaMet, Status: corev1.ConditionTrue, LastTransitionTime: now},
			{Type: batchv1.JobComplete, Status: corev1.ConditionTrue, LastTransitionTime: now},
		}
	})
	g.Eventually(phaseOf(rj)).WithTimeout(30 * time.Second).Should(Equal(restorev1.PhaseSucceeded))
	g.Eventually(func(g Gomega) {
		g.Expect(env.Client.Get(ctx, client.ObjectKeyFromObject(pod), pod)).To(Succeed())
		g.Expect(controllerutil.ContainsFinalizer(pod, controller.ScratchReportFinalizer)).To(BeFalse())
	}).WithTimeout(30 * time.Second).Should(Succeed())
}
