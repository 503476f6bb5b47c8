package references

import (
	"context"

	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
)

// IndexField is the field index of referring objects: one value
// "Kind/namespace/name" per object they refer to.
const IndexField = "cairn.dev/references"

// Key is the index value of a referenced object.
func Key(kind, namespace, name string) string { return kind + "/" + namespace + "/" + name }

// Register indexes objects of obj's kind by the objects refs says they refer
// to, for EnqueueReferrers.
func Register(ctx context.Context, indexer client.FieldIndexer, obj client.Object, refs func(client.Object) []Ref) error {
	return indexer.IndexField(ctx, obj, IndexField, func(o client.Object) []string {
		var keys []string
		for _, r := range refs(o) {
			keys = append(keys, Key(r.Kind, r.Namespace, r.Name))
		}
		return keys
	})
}

// EnqueueReferrers maps an event of a referenced object of kind to exactly
// the objects that refer to it (listed through the index in newList's
// kind) — never to every object. Use it on a metadata-only watch of
// Secrets or PVCs.
func EnqueueReferrers(c client.Reader, kind string, newList func() client.ObjectList) handler.EventHandler {
	return handler.EnqueueRequestsFromMapFunc(func(ctx context.Context, obj client.Object) []reconcile.Request {
		list := newList()
		if err := c.List(ctx, list, client.MatchingFields{IndexField: Key(kind, obj.GetNamespace(), obj.GetName())}); err != nil {
			ctrl.LoggerFrom(ctx).Error(err, "listing referrers", "kind", kind, "object", client.ObjectKeyFromObject(obj))
			return nil
		}
		items, err := meta.ExtractList(list)
		if err != nil {
			return nil
		}
		reqs := make([]reconcile.Request, 0, len(items))
		for _, it := range items {
			if o, ok := it.(client.Object); ok {
				reqs = append(reqs, reconcile.Request{NamespacedName: types.NamespacedName{Namespace: o.GetNamespace(), Name: o.GetName()}})
			}
		}
		return reqs
	})
}
