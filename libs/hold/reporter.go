package hold

import (
	"context"

	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	crreconcile "sigs.k8s.io/controller-runtime/pkg/reconcile"

	"cairn.dev/libs/reconcile"
)

// Children is the other way round from Hold: objects an owner creates (a
// restore's pods) carrying Finalizer until a controller of their own has
// read what they hold (the agent's report), labelled Label=<owner's name>.
type Children struct {
	Finalizer string
	Label     string
	// Object is an empty child (e.g. &corev1.Pod{}) and List an empty list
	// of them.
	Object client.Object
	List   client.ObjectList
	// Owner is an empty owner; Has reports whether an owner can have held
	// children at all (nil: every one).
	Owner client.Object
	Has   func(owner client.Object) bool
}

// Reporter is r registered (Setup) as controller name of the held
// children with the controller of their owners' kind: a reconcile.Watch
// for its Complete.
func (c *Children) Reporter(r crreconcile.Reconciler, name string) reconcile.Watch {
	return func(w *reconcile.Wiring) error { return c.Setup(w.Manager, w.Client, r, name, w.Options) }
}

// Setup registers r as controller name of the held children (those in the
// cache that carry the finalizer), woken by their events and by their
// owner's, mapped to its held children (listed from the cache with cl).
func (c *Children) Setup(mgr ctrl.Manager, cl client.Client, r crreconcile.Reconciler, name string, opts controller.Options) error {
	held := func(o client.Object) bool { return controllerutil.ContainsFinalizer(o, c.Finalizer) }
	children := handler.EnqueueRequestsFromMapFunc(func(ctx context.Context, o client.Object) []crreconcile.Request {
		if c.Has != nil && !c.Has(o) {
			return nil
		}
		list := c.List.DeepCopyObject().(client.ObjectList)
		if err := cl.List(ctx, list, client.InNamespace(o.GetNamespace()), client.MatchingLabels{c.Label: o.GetName()}); err != nil {
			return nil
		}
		var reqs []crreconcile.Request
		_ = meta.EachListItem(list, func(item runtime.Object) error {
			if ch, ok := item.(client.Object); ok && held(ch) {
				reqs = append(reqs, crreconcile.Request{NamespacedName: client.ObjectKeyFromObject(ch)})
			}
			return nil
		})
		return reqs
	})
	return ctrl.NewControllerManagedBy(mgr).
		Named(name).
		WithOptions(opts).
		For(c.Object, builder.WithPredicates(predicate.NewPredicateFuncs(held))).
		Watches(c.Owner, children).
		Complete(r)
}
