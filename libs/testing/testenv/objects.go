package testenv

import (
	"context"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Secret creates a Secret in namespace ns whose keys are keys, each with a
// non-empty value (a credentials Secret the operators' reference checks
// accept).
func (e *Env) Secret(ctx context.Context, ns, name string, keys ...string) error {
	data := map[string]string{}
	for _, k := range keys {
		data[k] = "test-" + k
	}
	return e.Client.Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}, StringData: data})
}

// PVC creates a PersistentVolumeClaim (it stays Pending: only its existence
// matters to the operators' reference checks).
func (e *Env) PVC(ctx context.Context, ns, name string) error {
	return e.Client.Create(ctx, &corev1.PersistentVolumeClaim{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: corev1.PersistentVolumeClaimSpec{
			AccessModes: []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
			Resources:   corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: resourceOneGi}},
		},
	})
}

var resourceOneGi = resource.MustParse("1Gi")
