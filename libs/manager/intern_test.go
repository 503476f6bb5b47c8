package manager_test

import (
	"testing"
	"unsafe"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"cairn.dev/libs/manager"
)

func pod(name string) *corev1.Pod {
	// Built from fresh byte slices: equal strings in separate memory, as
	// the decoder makes them.
	s := func(v string) string { return string([]byte(v)) }
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: s("prod"), Name: name,
			Labels:          map[string]string{s("app.kubernetes.io/managed-by"): s("cairn")},
			OwnerReferences: []metav1.OwnerReference{{APIVersion: s("batch/v1"), Kind: s("Job"), Name: s("j")}},
			ManagedFields:   []metav1.ManagedFieldsEntry{{Manager: s("m")}}},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: s("agent"), Image: s("agent:1"),
			Resources: corev1.ResourceRequirements{Limits: corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("64Mi")}}}}},
		Status: corev1.PodStatus{Conditions: []corev1.PodCondition{{Type: corev1.PodReady, Reason: s("Ready"), Message: s("ok")}}},
	}
}

func same(a, b string) bool { return unsafe.StringData(a) == unsafe.StringData(b) }

func TestInternStringsSharesEqualValuesAndChangesNothingElse(t *testing.T) {
	a, b := pod("a"), pod("b")
	wantA := a.DeepCopy()
	manager.InternStrings(a)
	manager.InternStrings(b)
	wantA.ManagedFields = a.ManagedFields
	if !equalPods(a, wantA) {
		t.Fatalf("interning changed the object:\n%+v\nwant\n%+v", a, wantA)
	}
	for _, p := range [][2]string{
		{a.Namespace, b.Namespace},
		{a.Spec.Containers[0].Image, b.Spec.Containers[0].Image},
		{a.OwnerReferences[0].APIVersion, b.OwnerReferences[0].APIVersion},
		{a.Status.Conditions[0].Message, b.Status.Conditions[0].Message},
		{a.Labels["app.kubernetes.io/managed-by"], b.Labels["app.kubernetes.io/managed-by"]},
	} {
		if !same(p[0], p[1]) {
			t.Errorf("%q is held twice after interning", p[0])
		}
	}
	for k := range a.Labels {
		for l := range b.Labels {
			if !same(k, l) {
				t.Errorf("label key %q is held twice after interning", k)
			}
		}
	}
	if q := a.Spec.Containers[0].Resources.Limits[corev1.ResourceMemory]; q.String() != "64Mi" {
		t.Errorf("quantity changed: %s", q.String())
	}
}

func TestTransformStripAndIntern(t *testing.T) {
	p := pod("a")
	out, err := manager.TransformStripAndIntern()(p)
	if err != nil {
		t.Fatal(err)
	}
	got := out.(*corev1.Pod)
	if got.ManagedFields != nil {
		t.Errorf("managedFields kept: %v", got.ManagedFields)
	}
	if got.Name != "a" || got.Namespace != "prod" || got.Labels["app.kubernetes.io/managed-by"] != "cairn" {
		t.Errorf("object changed: %+v", got.ObjectMeta)
	}
	meta := &metav1.PartialObjectMetadata{ObjectMeta: metav1.ObjectMeta{Name: "m", Annotations: map[string]string{"k": "v"}}}
	if _, err := manager.TransformStripAndIntern()(meta); err != nil || meta.Annotations["k"] != "v" {
		t.Errorf("metadata object: %v %v", err, meta.Annotations)
	}
}

func equalPods(a, b *corev1.Pod) bool {
	return a.String() == b.String()
}
