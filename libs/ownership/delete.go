package ownership

import (
	"context"
	"errors"
	"fmt"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// Children selects an owner's children for DeleteChildren.
type Children struct {
	// Kinds are empty lists of the kinds to look in, e.g. &batchv1.JobList{},
	// or a metav1.PartialObjectMetadataList with its GroupVersionKind set
	// (e.g. "CronJobList") for a kind the cache holds as metadata only.
	Kinds []client.ObjectList
	// Labels, when set, select children by label (e.g. the owner's name
	// label).
	Labels map[string]string
	// Namespace to look in; empty means the owner's. ClusterWide looks in
	// every namespace and at cluster-scoped kinds — e.g. the labelled
	// objects an owner made in another cluster (pass that cluster's
	// client), where owner references cannot point.
	Namespace   string
	ClusterWide bool
	// Controlled keeps only objects whose controller reference is the owner
	// (by UID). At least one of Labels and Controlled must be set. Without
	// Controlled, labelled objects controlled by something else go too — e.g.
	// the Jobs a child CronJob made, which carry the owner's label.
	Controlled bool
}

// DeleteChildren deletes the owner's children that ch selects and reports
// whether none is left: a finalizer step calls it until it returns true
// ("delete the children and wait until they are gone"). Each delete carries
// the child's UID as a precondition (a new object of the same name is never
// deleted by mistake) and background propagation (the garbage collector
// removes the child's own dependents, e.g. a Job's Pods). A child already
// being deleted is waited for, not deleted again, so repeating DeleteChildren
// writes nothing new. Reading through a cache, "gone" means gone from the
// cache.
func DeleteChildren(ctx context.Context, c client.Client, owner client.Object, ch Children) (gone bool, err error) {
	if len(ch.Labels) == 0 && !ch.Controlled {
		return false, errors.New("ownership: DeleteChildren needs Labels or Controlled, or it would select every object in the namespace")
	}
	ns := ch.Namespace
	switch {
	case ch.ClusterWide:
		ns = ""
	case ns == "":
		ns = owner.GetNamespace()
	}
	opts := []client.ListOption{client.InNamespace(ns)}
	if len(ch.Labels) > 0 {
		opts = append(opts, client.MatchingLabels(ch.Labels))
	}
	left := 0
	for _, list := range ch.Kinds {
		list = list.DeepCopyObject().(client.ObjectList)
		if err := c.List(ctx, list, opts...); err != nil {
			return false, fmt.Errorf("ownership: listing children: %w", err)
		}
		var children []client.Object
		if err := meta.EachListItem(list, func(o runtime.Object) error {
			obj, ok := o.(client.Object)
			if !ok {
				return fmt.Errorf("ownership: %T is not a client.Object", o)
			}
			if ch.Controlled && !metav1.IsControlledBy(obj, owner) {
				return nil
			}
			children = append(children, obj)
			return nil
		}); err != nil {
			return false, err
		}
		for _, obj := range children {
			if !obj.GetDeletionTimestamp().IsZero() {
				left++ // waiting for its finalizers
				continue
			}
			if pm, ok := obj.(*metav1.PartialObjectMetadata); ok && pm.GroupVersionKind().Empty() {
				// Items of a metadata list carry no kind: the list's.
				gvk := list.GetObjectKind().GroupVersionKind()
				gvk.Kind = trimList(gvk.Kind)
				pm.SetGroupVersionKind(gvk)
			}
			uid := obj.GetUID()
			err := c.Delete(ctx, obj, client.Preconditions{UID: &uid}, client.PropagationPolicy(metav1.DeletePropagationBackground))
			switch {
			case apierrors.IsNotFound(err):
				// gone already (the cache was behind)
			case apierrors.IsConflict(err):
				left++ // replaced by a new object of the same name: look again
			case err != nil:
				return false, fmt.Errorf("ownership: deleting %s: %w", client.ObjectKeyFromObject(obj), err)
			default:
				left++ // deleted; gone once the next read no longer sees it
			}
		}
	}
	return left == 0, nil
}

func trimList(kind string) string {
	if len(kind) > 4 && kind[len(kind)-4:] == "List" {
		return kind[:len(kind)-4]
	}
	return kind
}
