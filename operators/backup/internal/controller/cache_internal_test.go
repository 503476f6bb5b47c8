package controller

import (
	"testing"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	backupv1 "cairn.dev/apis/backup/v1"
	cairnv1 "cairn.dev/apis/meta/v1"
	"cairn.dev/libs/agentjob"
)

// The cache keeps of a run's Job and Pods what observeRuns and cleanup read.
func TestTransformRunKeepsWhatTheControllerReads(t *testing.T) {
	bj := &backupv1.BackupJob{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "orders", UID: "u1"},
		Spec: backupv1.BackupJobSpec{Storage: cairnv1.StorageSpec{S3: &cairnv1.S3Storage{Bucket: "b"}}}}
	job := runNowJob(bj, "agent:1", "req-1")
	job.ManagedFields = []metav1.ManagedFieldsEntry{{Manager: "m"}}
	now := metav1.Now()
	job.Status = batchv1.JobStatus{StartTime: &now, Conditions: []batchv1.JobCondition{{Type: batchv1.JobComplete, Status: corev1.ConditionTrue, LastTransitionTime: now}}}
	out, err := agentjob.TransformRun(job)
	if err != nil {
		t.Fatal(err)
	}
	j := out.(*batchv1.Job)
	if len(j.Spec.Template.Spec.Containers) != 0 || j.ManagedFields != nil {
		t.Fatalf("spec or managedFields kept: %+v", j)
	}
	if j.Labels[BackupJobLabel] != "orders" || j.Labels[RunKindLabel] != runNow || j.Name != job.Name || j.Status.StartTime == nil {
		t.Fatalf("metadata or status lost: %+v", j)
	}
	if o := agentjob.JobOutcome(j); !o.Finished || !o.Succeeded {
		t.Fatalf("outcome lost: %+v", o)
	}

	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "p", Labels: map[string]string{jobNameLabel: job.Name}},
		Spec: agentjob.PodTemplate(runSpec(bj, "agent:1", runNow)).Spec,
		Status: corev1.PodStatus{ContainerStatuses: []corev1.ContainerStatus{{Name: agentjob.ContainerName,
			State: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{Message: `{"error":"x"}`, ExitCode: 1}}}}}}
	out, err = agentjob.TransformRun(pod)
	if err != nil {
		t.Fatal(err)
	}
	p := out.(*corev1.Pod)
	if len(p.Spec.Containers) != 0 || p.Labels[jobNameLabel] != job.Name {
		t.Fatalf("pod transform: %+v", p)
	}
	if _, failure, _ := agentjob.PodResult([]corev1.Pod{*p}); failure == "" {
		t.Fatal("the agent's termination message was lost")
	}
	// Anything else passes through.
	if out, err := agentjob.TransformRun("x"); err != nil || out != "x" {
		t.Fatalf("other object: %v %v", out, err)
	}
}
