package testenv

import (
	"context"
	"fmt"
	"testing"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// Secret creates a Secret in namespace ns whose keys are keys, each with a
// non-empty value (a credentials Secret the operators' reference checks
// accept).
func (e *Env) Secret(ctx context.Context, ns, name string, keys ...string) error {
	return e.Client.Create(ctx, secret(ns, name, keys...))
}

func secret(ns, name string, keys ...string) *corev1.Secret {
	data := map[string]string{}
	for _, k := range keys {
		data[k] = "test-" + k
	}
	return &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}, StringData: data}
}

// PVC creates a PersistentVolumeClaim (it stays Pending: only its existence
// matters to the operators' reference checks).
func (e *Env) PVC(ctx context.Context, ns, name string) error {
	return e.Client.Create(ctx, pvc(ns, name))
}

func pvc(ns, name string) *corev1.PersistentVolumeClaim {
	return &corev1.PersistentVolumeClaim{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: corev1.PersistentVolumeClaimSpec{
			AccessModes: []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
			Resources:   corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: resourceOneGi}},
		},
	}
}

var resourceOneGi = resource.MustParse("1Gi")

// References names the objects the Cairn objects of a test (or a bench)
// refer to: database credentials Secrets (username, password), S3
// credentials Secrets (the key pair) and PVCs.
type References struct {
	Database, S3, PVCs []string
}

// Create makes refs in namespace ns with c.
func (refs References) Create(ctx context.Context, c client.Client, ns string) error {
	var all []client.Object
	for _, n := range refs.Database {
		all = append(all, secret(ns, n, "username", "password"))
	}
	for _, n := range refs.S3 {
		all = append(all, secret(ns, n, "accessKeyID", "secretAccessKey"))
	}
	for _, n := range refs.PVCs {
		all = append(all, pvc(ns, n))
	}
	for _, o := range all {
		if err := c.Create(ctx, o); err != nil {
			return err
		}
	}
	return nil
}

// NamespaceWith is a new namespace (Namespace) holding refs; the test
// fails when either cannot be made.
func (e *Env) NamespaceWith(t testing.TB, prefix string, refs References) string {
	t.Helper()
	ns, err := e.Namespace(context.Background(), prefix)
	if err != nil {
		t.Fatal(err)
	}
	if err := refs.Create(context.Background(), e.Client, ns); err != nil {
		t.Fatal(err)
	}
	return ns
}

// TerminateNamespace deletes namespace ns as `kubectl delete namespace`
// does and waits until the API server refuses new objects there (no
// namespace controller runs here: a test deletes the namespace's objects
// itself).
func (e *Env) TerminateNamespace(t testing.TB, ns string) {
	t.Helper()
	ctx := context.Background()
	if err := e.Client.Delete(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}); err != nil {
		t.Fatal(err)
	}
	Poll(t, Timeout, "namespace "+ns+" to refuse new objects", func() error {
		err := e.Client.Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, GenerateName: "probe-"}})
		if apierrors.HasStatusCause(err, corev1.NamespaceTerminatingCause) {
			return nil
		}
		return fmt.Errorf("creating a ConfigMap: %v", err)
	})
}

// ForeignJob is a Job named name in ns that no operator created (a name
// an operator's Job would take, already taken).
func ForeignJob(ns, name string) *batchv1.Job {
	return &batchv1.Job{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: batchv1.JobSpec{Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{
			RestartPolicy: corev1.RestartPolicyNever,
			Containers:    []corev1.Container{{Name: "x", Image: "busybox"}},
		}}},
	}
}
