package agentjob

import (
	"testing"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// TransformRun keeps what an operator reads of a cached run (metadata,
// status: JobOutcome, PodResult) and drops the spec and managedFields.
func TestTransformRunKeepsMetadataAndStatus(t *testing.T) {
	now := metav1.Now()
	job := &batchv1.Job{
		ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "j", Labels: map[string]string{"a": "b"},
			OwnerReferences: []metav1.OwnerReference{{Kind: "RestoreJob", Name: "r", UID: "u"}},
			ManagedFields:   []metav1.ManagedFieldsEntry{{Manager: "m"}}},
		Spec: JobSpec(Spec{Command: "restore", Image: "agent:1", Artifact: "a/b"}),
		Status: batchv1.JobStatus{StartTime: &now, Failed: 1,
			Conditions: []batchv1.JobCondition{{Type: batchv1.JobFailed, Status: corev1.ConditionTrue, Reason: "BackoffLimitExceeded", LastTransitionTime: now}}},
	}
	if JobAsCreated(job) {
		t.Fatal("a Job with a status is not as created")
	}
	out, err := TransformRun(job)
	if err != nil {
		t.Fatal(err)
	}
	j := out.(*batchv1.Job)
	if len(j.Spec.Template.Spec.Containers) != 0 || j.ManagedFields != nil {
		t.Fatalf("spec or managedFields kept: %+v", j.Spec)
	}
	if j.Labels["a"] != "b" || len(j.OwnerReferences) != 1 || j.Status.Failed != 1 || j.Status.StartTime == nil {
		t.Fatalf("metadata or status lost: %+v", j)
	}
	if o := JobOutcome(j); !o.Finished || o.Succeeded || o.Reason != "BackoffLimitExceeded" {
		t.Fatalf("outcome lost: %+v", o)
	}

	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "p"},
		Spec: PodTemplate(Spec{Command: "restore", Image: "agent:1"}).Spec,
		Status: corev1.PodStatus{ContainerStatuses: []corev1.ContainerStatus{{Name: ContainerName,
			State: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{Message: `{"error":"x"}`, ExitCode: 1}}}}}}
	out, err = TransformRun(pod)
	if err != nil {
		t.Fatal(err)
	}
	p := out.(*corev1.Pod)
	if len(p.Spec.Containers) != 0 {
		t.Fatalf("pod spec kept: %+v", p.Spec)
	}
	if _, failure, _ := PodResult([]corev1.Pod{*p}); failure == "" {
		t.Fatal("the agent's termination message was lost")
	}
	if out, err := TransformRun("x"); err != nil || out != "x" {
		t.Fatalf("other object: %v %v", out, err)
	}
}

func TestJobAsCreated(t *testing.T) {
	fresh := &batchv1.Job{ObjectMeta: metav1.ObjectMeta{Name: "j", Generation: 1}}
	if !JobAsCreated(fresh) {
		t.Fatal("a fresh Job is as created")
	}
	ready := int32(0)
	started := fresh.DeepCopy()
	started.Status.Ready = &ready
	if JobAsCreated(started) {
		t.Fatal("a Job whose status the Job controller wrote is not as created")
	}
	if JobAsCreated(&corev1.Pod{}) {
		t.Fatal("not a Job")
	}
}
