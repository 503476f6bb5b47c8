package finalizer

import (
	"context"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// NamespaceOf is, for Cleanup.AlsoReportOn, the Namespace of obj when it is
// being deleted (read live with r: the operator needs get on namespaces),
// about "<kind> <namespace>/<name>": Events in a namespace being deleted
// are refused, and Events about a Namespace are stored in "default", so
// they outlive it. Nil when the namespace is not being deleted or cannot
// be read (e.g. an operator confined to some namespaces).
func NamespaceOf(r client.Reader, obj client.Object, kind string) func(context.Context) (client.Object, string) {
	return func(ctx context.Context) (client.Object, string) {
		ns := &corev1.Namespace{}
		if err := r.Get(ctx, client.ObjectKey{Name: obj.GetNamespace()}, ns); err != nil || ns.Status.Phase != corev1.NamespaceTerminating {
			return nil, ""
		}
		return NamespaceRef(ns.Name), kind + " " + obj.GetNamespace() + "/" + obj.GetName()
	}
}

// NamespaceRef is namespace ns as the object an Event is about.
func NamespaceRef(ns string) *corev1.Namespace {
	return &corev1.Namespace{TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "Namespace"}, ObjectMeta: metav1.ObjectMeta{Name: ns}}
}
