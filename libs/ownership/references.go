package ownership

import (
	"context"
	"fmt"

	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
)

// Reference names an object that another object refers to without owning
// it: a RestoreJob's source BackupJob, a credentials Secret, an
// orchestrator's child of another operator.
type Reference struct {
	schema.GroupKind
	types.NamespacedName
}

// String is the reference as indexed: "group/Kind/namespace/name".
func (r Reference) String() string {
	return r.Group + "/" + r.Kind + "/" + r.Namespace + "/" + r.Name
}

// IndexReferences registers field index `index` (a name unique per referrer
// kind, e.g. "cairn.dev/references") on referrer's kind: each referrer is
// indexed under every Reference refs returns for it. With EnqueueReferrers,
// an event of a referenced object then wakes exactly its referrers. Call it
// before the manager starts, with mgr.GetFieldIndexer().
func IndexReferences(ctx context.Context, indexer client.FieldIndexer, referrer client.Object, index string, refs func(client.Object) []Reference) error {
	err := indexer.IndexField(ctx, referrer, index, func(obj client.Object) []string {
		var out []string
		for _, r := range refs(obj) {
			if r.Name != "" {
				out = append(out, r.String())
			}
		}
		return out
	})
	if err != nil {
		return fmt.Errorf("ownership: indexing %T by reference: %w", referrer, err)
	}
	return nil
}

// Referrers lists, through the index IndexReferences registered, the objects
// of referrers' kind that reference ref, and returns a request for each one
// every keep function keeps.
func Referrers(ctx context.Context, r client.Reader, index string, referrers client.ObjectList, ref Reference, keep ...func(client.Object) bool) ([]reconcile.Request, error) {
	list := referrers.DeepCopyObject().(client.ObjectList)
	if err := r.List(ctx, list, client.MatchingFields{index: ref.String()}); err != nil {
		return nil, err
	}
	var reqs []reconcile.Request
	err := meta.EachListItem(list, func(o runtime.Object) error {
		obj, ok := o.(client.Object)
		if !ok {
			return fmt.Errorf("ownership: %T is not a client.Object", o)
		}
		for _, k := range keep {
			if !k(obj) {
				return nil
			}
		}
		reqs = append(reqs, reconcile.Request{NamespacedName: client.ObjectKeyFromObject(obj)})
		return nil
	})
	return reqs, err
}

// EnqueueReferrers maps an event of an object of kind referenced to a request
// for each referrer (of referrers' kind, listed from the cache through index)
// that references it and that every keep function keeps — never to every
// referrer. The referenced kind can be watched as metadata only (e.g.
// builder.WatchesMetadata(&corev1.Secret{}, ...)): only its namespace and name
// are used, so a Secret's data is never cached.
func EnqueueReferrers(r client.Reader, index string, referrers client.ObjectList, referenced schema.GroupKind, keep ...func(client.Object) bool) handler.EventHandler {
	return handler.EnqueueRequestsFromMapFunc(func(ctx context.Context, obj client.Object) []reconcile.Request {
		ref := Reference{GroupKind: referenced, NamespacedName: client.ObjectKeyFromObject(obj)}
		reqs, err := Referrers(ctx, r, index, referrers, ref, keep...)
		if err != nil {
			ctrl.LoggerFrom(ctx).Error(err, "listing referrers", "reference", ref.String())
			return nil
		}
		return reqs
	})
}

// EnqueueReferrersInNamespace is EnqueueReferrers without an index, for
// referrers whose references all lie in their own namespace (a BackupJob's
// credentials Secrets and PVC): an event of a referenced object lists the
// referrers of that namespace from the cache (the informer's namespace index,
// no deep copy) and enqueues those whose refs name the object and that every
// keep function keeps. It costs a scan of one namespace's referrers per
// event of a referenced object — rare (Secrets and PVCs change seldom) —
// instead of index entries for every referrer held for its lifetime (about
// 0.3 KiB per BackupJob at N=1000). A reference to another namespace is never
// matched: use IndexReferences with EnqueueReferrers for those.
func EnqueueReferrersInNamespace(r client.Reader, referrers client.ObjectList, referenced schema.GroupKind, refs func(client.Object) []Reference, keep ...func(client.Object) bool) handler.EventHandler {
	return handler.EnqueueRequestsFromMapFunc(func(ctx context.Context, obj client.Object) []reconcile.Request {
		ref := Reference{GroupKind: referenced, NamespacedName: client.ObjectKeyFromObject(obj)}
		reqs, err := ReferrersInNamespace(ctx, r, referrers, ref, refs, keep...)
		if err != nil {
			ctrl.LoggerFrom(ctx).Error(err, "listing referrers", "reference", ref.String())
			return nil
		}
		return reqs
	})
}

// ReferrersInNamespace lists the objects of referrers' kind in ref's
// namespace whose refs name ref, and returns a request for each one every
// keep function keeps (see EnqueueReferrersInNamespace).
func ReferrersInNamespace(ctx context.Context, r client.Reader, referrers client.ObjectList, ref Reference, refs func(client.Object) []Reference, keep ...func(client.Object) bool) ([]reconcile.Request, error) {
	list := referrers.DeepCopyObject().(client.ObjectList)
	// Read only: the cache may hand out its own objects.
	if err := r.List(ctx, list, client.InNamespace(ref.Namespace), client.UnsafeDisableDeepCopy); err != nil {
		return nil, err
	}
	var reqs []reconcile.Request
	err := meta.EachListItem(list, func(o runtime.Object) error {
		obj, ok := o.(client.Object)
		if !ok {
			return fmt.Errorf("ownership: %T is not a client.Object", o)
		}
		found := false
		for _, x := range refs(obj) {
			if x == ref {
				found = true
				break
			}
		}
		if !found {
			return nil
		}
		for _, k := range keep {
			if !k(obj) {
				return nil
			}
		}
		reqs = append(reqs, reconcile.Request{NamespacedName: client.ObjectKeyFromObject(obj)})
		return nil
	})
	return reqs, err
}
