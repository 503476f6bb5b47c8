package ownership_test

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"cairn.dev/libs/ownership"
)

// A plain boolean the desired object leaves false is owned: a live true is
// drift and is reverted (a child suspended by hand), at any depth, in
// lists too. An optional *bool left nil, and defaulted fields, are not.
func TestDriftRevertsBooleanLeftFalse(t *testing.T) {
	desired := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: "a", Name: "p", Labels: map[string]string{"app": "x"}},
		Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "i"}}},
	}
	defaulted := func() *corev1.Pod {
		live := desired.DeepCopy()
		live.ResourceVersion = "7"
		live.Spec.RestartPolicy = corev1.RestartPolicyAlways
		live.Spec.AutomountServiceAccountToken = ptr.To(false) // *bool: not ours
		live.Spec.Containers[0].TerminationMessagePath = "/dev/termination-log"
		return live
	}
	if got, err := ownership.Drift(desired, defaulted()); err != nil || got != nil {
		t.Fatalf("defaulted live object: Drift = %v, %v; want no drift", got, err)
	}

	live := defaulted()
	live.Spec.HostNetwork = true
	got, err := ownership.Drift(desired, live)
	if err != nil || got == nil {
		t.Fatalf("hostNetwork set by hand: Drift = %v, %v; want drift", got, err)
	}
	pod := got.(*corev1.Pod)
	if pod.Spec.HostNetwork || pod.ResourceVersion != "7" || pod.Spec.RestartPolicy != corev1.RestartPolicyAlways ||
		pod.Spec.AutomountServiceAccountToken == nil || *pod.Spec.AutomountServiceAccountToken {
		t.Errorf("reverted object: %+v", pod.Spec)
	}
	if again, err := ownership.Drift(desired, pod); err != nil || again != nil {
		t.Errorf("the reverted object still drifts: %v, %v", again, err)
	}

	live = defaulted()
	live.Spec.Containers[0].Stdin = true
	got, err = ownership.Drift(desired, live)
	if err != nil || got == nil || got.(*corev1.Pod).Spec.Containers[0].Stdin {
		t.Fatalf("stdin set by hand in a list element: Drift = %v, %v; want reverted", got, err)
	}

	// Desired true, live true: no drift.
	desired.Spec.HostNetwork = true
	live = defaulted()
	if got, err := ownership.Drift(desired, live); err != nil || got != nil {
		t.Errorf("equal booleans: Drift = %v, %v", got, err)
	}
}

// A field in Owned that desired leaves unset is owned too: a live value is
// drift and removed (a template field turned off); an unset field not in
// Owned stays as the child has it.
func TestDriftOwningRemovesAnOwnedFieldLeftUnset(t *testing.T) {
	desired := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: "a", Name: "p"},
		Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "i"}}},
	}
	live := desired.DeepCopy()
	live.ResourceVersion = "3"
	live.Spec.ActiveDeadlineSeconds = ptr.To[int64](60)
	live.Spec.PriorityClassName = "defaulted"
	owned := [][]string{{"spec", "activeDeadlineSeconds"}}
	if got, err := ownership.Drift(desired, live); err != nil || got != nil {
		t.Fatalf("without Owned: Drift = %v, %v; want no drift", got, err)
	}
	got, err := ownership.DriftOwning(desired, live, owned)
	if err != nil || got == nil {
		t.Fatalf("owned field set live, unset desired: DriftOwning = %v, %v; want drift", got, err)
	}
	pod := got.(*corev1.Pod)
	if pod.Spec.ActiveDeadlineSeconds != nil || pod.Spec.PriorityClassName != "defaulted" || pod.ResourceVersion != "3" {
		t.Errorf("reverted object: %+v", pod.Spec)
	}
	if again, err := ownership.DriftOwning(desired, pod, owned); err != nil || again != nil {
		t.Errorf("the reverted object still drifts: %v, %v", again, err)
	}
	desired.Spec.ActiveDeadlineSeconds = ptr.To[int64](60)
	if got, err := ownership.DriftOwning(desired, live, owned); err != nil || got != nil {
		t.Errorf("owned field equal: DriftOwning = %v, %v", got, err)
	}
}
