// Package status writes an object's status only when it differs from what was
// read, so a reconcile that observes nothing new makes no API write — and a
// status write never re-triggers its own reconcile (see IgnoreStatusUpdates).
// This is the cure for the "event storm" of a controller that calls
// Status().Update on every pass.
package status

import (
	"context"
	"fmt"

	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
)

// Write patches obj's status subresource with a merge patch computed from
// original, the object as read at the start of the reconcile. When the status
// fields are semantically equal it makes no request and returns false. The
// patch carries original's resourceVersion: a status computed from a stale
// read fails with a conflict (and the reconcile is retried) instead of
// overwriting newer status.
func Write(ctx context.Context, c client.Client, original, obj client.Object) (bool, error) {
	before, err := statusOf(original)
	if err != nil {
		return false, err
	}
	after, err := statusOf(obj)
	if err != nil {
		return false, err
	}
	if equality.Semantic.DeepEqual(before, after) {
		return false, nil
	}
	if err := c.Status().Patch(ctx, obj, client.MergeFromWithOptions(original, client.MergeFromWithOptimisticLock{})); err != nil {
		return false, err
	}
	return true, nil
}

func statusOf(obj client.Object) (any, error) {
	u, err := runtime.DefaultUnstructuredConverter.ToUnstructured(obj)
	if err != nil {
		return nil, fmt.Errorf("status: converting %T: %w", obj, err)
	}
	return u["status"], nil
}

// IgnoreStatusUpdates passes create and delete events, and update events that
// change the spec (generation), metadata a controller acts on (labels,
// annotations, finalizers, deletion timestamp). Status-only updates — the
// controller's own writes — are dropped.
func IgnoreStatusUpdates() predicate.Predicate {
	return predicate.Funcs{
		UpdateFunc: func(e event.UpdateEvent) bool {
			o, n := e.ObjectOld, e.ObjectNew
			if o == nil || n == nil {
				return true
			}
			return o.GetGeneration() != n.GetGeneration() ||
				!equality.Semantic.DeepEqual(o.GetLabels(), n.GetLabels()) ||
				!equality.Semantic.DeepEqual(o.GetAnnotations(), n.GetAnnotations()) ||
				!equality.Semantic.DeepEqual(o.GetFinalizers(), n.GetFinalizers()) ||
				!o.GetDeletionTimestamp().Equal(n.GetDeletionTimestamp())
		},
	}
}
