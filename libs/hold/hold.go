// Package hold keeps objects an owner's cleanup will need after its
// namespace starts terminating (issue 30). When a namespace is deleted, the
// namespace controller deletes everything in it in one sweep: a BackupJob
// and the S3 credentials Secret its artifact delete needs, a MigrationJob
// and the kubeconfig Secret that reaches the target cluster it must clean
// up, a BackupJob and the claim its artifacts are stored on. A finalizer on
// each such object (put there while an owner needs it) keeps it until the
// owner's cleanup is over; a controller removes the finalizer as soon as no
// owner of the namespace needs the object any more — an owner switched to
// another object, changed a policy, or went away — so nothing stays
// Terminating because of Cairn.
//
// Objects are read and written as metadata only (the operators' caches
// hold Secrets and PVCs that way), with a merge patch of
// metadata.finalizers and the optimistic lock. What else an operator may
// write to them is up to its admission policy (docs/security.md).
package hold

import (
	"context"
	"fmt"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/workqueue"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	crreconcile "sigs.k8s.io/controller-runtime/pkg/reconcile"

	"cairn.dev/libs/reconcile"
)

// Hold is one kind of object its owners keep with one finalizer.
type Hold struct {
	// Finalizer put on a held object, e.g. "backup.cairn.dev/artifact-delete".
	Finalizer string
	// Kind of the held objects (a core kind such as Secret or
	// PersistentVolumeClaim), read and written as metadata.
	Kind schema.GroupVersionKind
	// Owner is an empty owner (e.g. &BackupJob{}) and Owners an empty list
	// of them: the owners of a namespace are read from the cache.
	Owner  client.Object
	Owners client.ObjectList
	// Needs names the objects of its own namespace an owner needs held
	// (nil or none: nothing).
	Needs func(owner client.Object) []string
	// Cleanup is the owner's own cleanup finalizer: an owner being deleted
	// needs its objects while it still carries it.
	Cleanup string
	// Releasing, when set, runs before the finalizer is removed from an
	// object no owner needs: it undoes what the owners' cleanups did to
	// reach it (e.g. a volume rebound elsewhere). An error retries.
	Releasing func(ctx context.Context, key types.NamespacedName) error
}

func (h *Hold) object() *metav1.PartialObjectMetadata {
	m := &metav1.PartialObjectMetadata{}
	m.SetGroupVersionKind(h.Kind)
	return m
}

// Ensure puts the finalizer on every object owner needs (a reconcile step,
// after the owner's references were approved and found). An object already
// held, missing or being deleted is left as it is: the API refuses a new
// finalizer on an object being deleted.
func (h *Hold) Ensure(ctx context.Context, c client.Client, owner client.Object) error {
	for _, name := range h.Needs(owner) {
		if name == "" {
			continue
		}
		if err := h.set(ctx, c, types.NamespacedName{Namespace: owner.GetNamespace(), Name: name}, true); err != nil {
			return fmt.Errorf("holding %s %s/%s with %s: %w", h.Kind.Kind, owner.GetNamespace(), name, h.Finalizer, err)
		}
	}
	return nil
}

// Held reports whether the object named key carries the finalizer.
func (h *Hold) Held(ctx context.Context, c client.Reader, key types.NamespacedName) (bool, error) {
	m := h.object()
	if err := c.Get(ctx, key, m); err != nil {
		return false, client.IgnoreNotFound(err)
	}
	return controllerutil.ContainsFinalizer(m, h.Finalizer), nil
}

// set adds (want) or removes the finalizer: a metadata merge patch with the
// optimistic lock, read from the metadata cache.
func (h *Hold) set(ctx context.Context, c client.Client, key types.NamespacedName, want bool) error {
	m := h.object()
	if err := c.Get(ctx, key, m); err != nil {
		return client.IgnoreNotFound(err)
	}
	if controllerutil.ContainsFinalizer(m, h.Finalizer) == want || (want && !m.DeletionTimestamp.IsZero()) {
		return nil
	}
	orig := m.DeepCopy()
	if want {
		controllerutil.AddFinalizer(m, h.Finalizer)
	} else {
		controllerutil.RemoveFinalizer(m, h.Finalizer)
	}
	return client.IgnoreNotFound(c.Patch(ctx, m, client.MergeFromWithOptions(orig, client.MergeFromWithOptimisticLock{})))
}

// needed reports whether an owner of key's namespace still needs it: it
// names it and is live or still cleaning up.
func (h *Hold) needed(ctx context.Context, c client.Reader, key types.NamespacedName) (bool, error) {
	list := h.Owners.DeepCopyObject().(client.ObjectList)
	if err := c.List(ctx, list, client.InNamespace(key.Namespace)); err != nil {
		return false, err
	}
	items, err := meta.ExtractList(list)
	if err != nil {
		return false, err
	}
	for _, item := range items {
		o, ok := item.(client.Object)
		if !ok {
			return false, fmt.Errorf("hold: %T is not a client.Object", item)
		}
		if !o.GetDeletionTimestamp().IsZero() && !controllerutil.ContainsFinalizer(o, h.Cleanup) {
			continue
		}
		for _, name := range h.Needs(o) {
			if name == key.Name {
				return true, nil
			}
		}
	}
	return false, nil
}

// releaser removes the finalizer from an object no owner needs any more.
// It is keyed by the held object and woken by its changes and by every
// owner change, mapped to the objects the owner names before and after.
type releaser struct {
	h *Hold
	c client.Client
}

func (r *releaser) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	held, err := r.h.Held(ctx, r.c, req.NamespacedName)
	if err != nil || !held {
		return ctrl.Result{}, err
	}
	needed, err := r.h.needed(ctx, r.c, req.NamespacedName)
	if err != nil || needed {
		return ctrl.Result{}, err
	}
	if r.h.Releasing != nil {
		if err := r.h.Releasing(ctx, req.NamespacedName); err != nil {
			return ctrl.Result{}, err
		}
	}
	ctrl.LoggerFrom(ctx).Info("no owner needs the object any more; releasing it", "kind", r.h.Kind.Kind, "finalizer", r.h.Finalizer)
	return ctrl.Result{}, r.h.set(ctx, r.c, req.NamespacedName, false)
}

// Releaser is the releaser registered (Setup) as controller name with the
// controller of the owners' kind: a reconcile.Watch for its Complete.
func (h *Hold) Releaser(name string) reconcile.Watch {
	return func(w *reconcile.Wiring) error { return h.Setup(w.Manager, w.Client, name, w.Options) }
}

// Setup registers the releaser as controller name: held objects (metadata
// only: the cache the operator's controller already holds for them) that
// carry the finalizer, and every owner change mapped to the objects it
// needs before and after the change.
func (h *Hold) Setup(mgr ctrl.Manager, c client.Client, name string, opts controller.Options) error {
	held := predicate.NewPredicateFuncs(func(o client.Object) bool {
		return controllerutil.ContainsFinalizer(o, h.Finalizer)
	})
	enqueue := func(q workqueue.TypedRateLimitingInterface[crreconcile.Request], o client.Object) {
		for _, n := range h.Needs(o) {
			if n != "" {
				q.Add(crreconcile.Request{NamespacedName: types.NamespacedName{Namespace: o.GetNamespace(), Name: n}})
			}
		}
	}
	owners := handler.Funcs{
		CreateFunc: func(_ context.Context, e event.CreateEvent, q workqueue.TypedRateLimitingInterface[crreconcile.Request]) {
			enqueue(q, e.Object)
		},
		UpdateFunc: func(_ context.Context, e event.UpdateEvent, q workqueue.TypedRateLimitingInterface[crreconcile.Request]) {
			enqueue(q, e.ObjectOld)
			enqueue(q, e.ObjectNew)
		},
		DeleteFunc: func(_ context.Context, e event.DeleteEvent, q workqueue.TypedRateLimitingInterface[crreconcile.Request]) {
			enqueue(q, e.Object)
		},
	}
	return ctrl.NewControllerManagedBy(mgr).
		Named(name).
		WithOptions(opts).
		For(h.object(), builder.WithPredicates(held)).
		Watches(h.Owner, owners).
		Complete(&releaser{h: h, c: c})
}
