package testenv

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/onsi/gomega"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// What the job controller and the kubelet would do to an agent Job (the
// test API server runs neither): its pods, their agent container's exit
// and termination message, the Job's status.

// Timeout bounds the helpers' retries on a conflict, and WaitForJob.
const Timeout = 30 * time.Second

// Jobs lists the Jobs in namespace ns of the cluster of c that opts select
// (all of them without).
func Jobs(g gomega.Gomega, c client.Reader, ns string, opts ...client.ListOption) []batchv1.Job {
	list := &batchv1.JobList{}
	g.Expect(c.List(context.Background(), list, append([]client.ListOption{client.InNamespace(ns)}, opts...)...)).To(gomega.Succeed())
	return list.Items
}

// WaitForJob waits (up to Timeout) until the Job ns/name exists in the
// cluster of c, and returns it.
func WaitForJob(t testing.TB, c client.Reader, ns, name string) *batchv1.Job {
	t.Helper()
	job := &batchv1.Job{}
	gomega.NewWithT(t).Eventually(func() error {
		return c.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: name}, job)
	}).WithTimeout(Timeout).WithPolling(100*time.Millisecond).Should(gomega.Succeed(), "Job %s/%s", ns, name)
	return job
}

// AgentEnv is the environment of job's agent container (its first), by
// variable name (of duplicates, the later).
func AgentEnv(job *batchv1.Job) map[string]corev1.EnvVar {
	out := map[string]corev1.EnvVar{}
	for _, e := range job.Spec.Template.Spec.Containers[0].Env {
		out[e.Name] = e
	}
	return out
}

// AgentPod creates pod n of job (in the cluster of c) whose agent
// container terminated with exitCode and message.
func AgentPod(t testing.TB, c client.Client, job *batchv1.Job, n int, exitCode int32, message string) {
	t.Helper()
	ctx := context.Background()
	labels := map[string]string{}
	for k, v := range job.Spec.Template.Labels {
		labels[k] = v
	}
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{
			Namespace: job.Namespace, Name: fmt.Sprintf("%s-%d", job.Name, n), Labels: labels,
			OwnerReferences: []metav1.OwnerReference{{
				APIVersion: "batch/v1", Kind: "Job", Name: job.Name, UID: job.UID,
				Controller: ptr.To(true), BlockOwnerDeletion: ptr.To(true),
			}},
		},
		Spec: *job.Spec.Template.Spec.DeepCopy(),
	}
	pod.Spec.NodeName = "node-1"
	if err := c.Create(ctx, pod); err != nil {
		t.Fatal(err)
	}
	now := metav1.Now()
	phase := corev1.PodSucceeded
	if exitCode != 0 {
		phase = corev1.PodFailed
	}
	pod.Status = corev1.PodStatus{
		Phase: phase,
		ContainerStatuses: []corev1.ContainerStatus{{
			Name: "agent", Image: pod.Spec.Containers[0].Image, ImageID: "sha256:abc", ContainerID: "containerd://abc",
			State: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{
				ExitCode: exitCode, Reason: map[bool]string{true: "Completed", false: "Error"}[exitCode == 0],
				Message: message, StartedAt: now, FinishedAt: metav1.NewTime(now.Add(time.Duration(n) * time.Millisecond)),
			}},
		}},
	}
	if err := c.Status().Update(ctx, pod); err != nil {
		t.Fatal(err)
	}
}

// UpdateJobStatus applies mutate to job's status (read anew, a start time
// given when it has none) and stores it, again on a conflict.
func UpdateJobStatus(t testing.TB, c client.Client, job *batchv1.Job, mutate func(*batchv1.JobStatus)) {
	t.Helper()
	gomega.NewWithT(t).Eventually(func() error {
		cur := &batchv1.Job{}
		if err := c.Get(context.Background(), client.ObjectKeyFromObject(job), cur); err != nil {
			return err
		}
		if cur.Status.StartTime == nil {
			st := metav1.NewTime(time.Now().Add(-time.Second))
			cur.Status.StartTime = &st
		}
		mutate(&cur.Status)
		return c.Status().Update(context.Background(), cur)
	}).WithTimeout(Timeout).Should(gomega.Succeed())
}

// CompleteJob marks job Complete after one successful pod whose agent
// reported message.
func CompleteJob(t testing.TB, c client.Client, job *batchv1.Job, message string) {
	t.Helper()
	AgentPod(t, c, job, 1, 0, message)
	UpdateJobStatus(t, c, job, func(s *batchv1.JobStatus) {
		now := metav1.Now()
		s.Succeeded, s.Active = 1, 0
		s.CompletionTime = &now
		s.Conditions = []batchv1.JobCondition{
			{Type: batchv1.JobSuccessCriteriaMet, Status: corev1.ConditionTrue, Reason: "CompletionsReached", LastTransitionTime: now, LastProbeTime: now},
			{Type: batchv1.JobComplete, Status: corev1.ConditionTrue, Reason: "CompletionsReached", LastTransitionTime: now, LastProbeTime: now},
		}
	})
}

// FailJob marks job Failed (BackoffLimitExceeded) after attempts failed
// pods, each of whose agent reported message.
func FailJob(t testing.TB, c client.Client, job *batchv1.Job, attempts int32, message string) {
	t.Helper()
	for i := range attempts {
		AgentPod(t, c, job, int(i)+1, 1, message)
	}
	UpdateJobStatus(t, c, job, func(s *batchv1.JobStatus) {
		now := metav1.Now()
		s.Failed, s.Active = attempts, 0
		msg := "Job has reached the specified backoff limit"
		s.Conditions = []batchv1.JobCondition{
			{Type: batchv1.JobFailureTarget, Status: corev1.ConditionTrue, Reason: batchv1.JobReasonBackoffLimitExceeded, Message: msg, LastTransitionTime: now, LastProbeTime: now},
			{Type: batchv1.JobFailed, Status: corev1.ConditionTrue, Reason: batchv1.JobReasonBackoffLimitExceeded, Message: msg, LastTransitionTime: now, LastProbeTime: now},
		}
	})
}
