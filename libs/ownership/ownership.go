// Package ownership keeps an owner's children and follows its references:
//
//   - Applier.Ensure sets and checks the controller reference, creates a
//     missing child, reverts a drifted one and leaves a matching one alone
//     (never a second child, never someone else's object adopted). With
//     MetadataOnly it does so for children cached as metadata only, from two
//     annotations (spec hash, generation), reading a child in full only when
//     they disagree.
//   - DeleteChildren deletes an owner's children (by label and/or controller
//     reference, UID precondition, background propagation) and says when they
//     are gone: a finalizer's "delete the children and wait".
//   - EnqueueOwnerByLabel maps a child's events to exactly its one owner;
//     IndexReferences with EnqueueReferrers maps a referenced object's events
//     (a Secret, another operator's object) to exactly the objects that
//     reference it — never a full requeue of every owner.
//     EnqueueReferrersInNamespace does the same without an index, by
//     scanning the referenced object's namespace in the cache, for referrers
//     whose references all lie in their own namespace (no memory per
//     referrer).
package ownership

import (
	"context"
	"fmt"
	"reflect"
	"sync"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
)

// SetController makes owner the controller of child. It fails loudly when the
// reference cannot be set: an owner without a UID (not read from the API
// server), a cluster-scoped child of a namespaced owner, a cross-namespace
// child, or a child already controlled by someone else.
func SetController(owner, child client.Object, scheme *runtime.Scheme) error {
	if owner.GetUID() == "" {
		return fmt.Errorf("ownership: owner %s has no UID; read it from the API server first", client.ObjectKeyFromObject(owner))
	}
	if err := controllerutil.SetControllerReference(owner, child, scheme); err != nil {
		return fmt.Errorf("ownership: setting controller of %s: %w", client.ObjectKeyFromObject(child), err)
	}
	if !metav1.IsControlledBy(child, owner) {
		return fmt.Errorf("ownership: controller reference of %s does not point at %s", client.ObjectKeyFromObject(child), client.ObjectKeyFromObject(owner))
	}
	return nil
}

// NotControlledError: a child with the desired name exists but is not
// controlled by the owner. Cairn never adopts or overwrites it; the owner
// should report Stalled.
type NotControlledError struct {
	Kind string
	Key  types.NamespacedName
}

func (e *NotControlledError) Error() string {
	return fmt.Sprintf("%s %s exists and is not controlled by this object; rename or delete it", e.Kind, e.Key)
}

// Op is what Ensure did.
type Op string

const (
	// Created: the child did not exist and was created.
	Created Op = "Created"
	// Updated: the child differed from the desired state and was updated.
	Updated Op = "Updated"
	// Unchanged: the child already matched.
	Unchanged Op = "Unchanged"
)

// Applier ensures children.
type Applier struct {
	// Client reads (usually from the cache) and writes.
	Client client.Client
	// APIReader reads past the cache, to tell our own not-yet-cached child
	// from someone else's object with the same name when a create conflicts.
	APIReader client.Reader
	// Scheme knows the owner's and child's kinds.
	Scheme *runtime.Scheme

	// MetadataOnly is for children the Client's cache holds as metadata only
	// (PartialObjectMetadata, e.g. builder.OnlyMetadata on Owns): memory for
	// their specs and pod templates is never spent. Ensure then reads only the
	// child's metadata, where two annotations (HashAnnotation,
	// GenerationAnnotation) say whether it still matches desired; only when
	// they disagree does it read the child in full through APIReader (which
	// must be set) and revert drift. It works for any kind whose API server
	// bumps metadata.generation on every change outside metadata and status
	// (CRDs with a status subresource, CronJob, Job, Deployment, ...); for a
	// kind that does not (ConfigMap, Secret) Ensure fails loudly.
	MetadataOnly bool
	// Owned lists optional fields (paths from the object's root, e.g.
	// {"spec", "pointInTime"}) that desired owns even when it leaves them
	// unset: a live value there is drift, removed — a template field its
	// owner turned off. Other unset fields stay as the child has them (the
	// API server's defaults, or another writer's).
	Owned [][]string
	// AnnotationPrefix names the metadata-only mode's annotations:
	// "<prefix>/spec-hash" and "<prefix>/spec-generation". Empty means
	// DefaultAnnotationPrefix ("cairn.dev").
	AnnotationPrefix string

	// bumps holds the kinds seen to bump their generation on an
	// annotation-only change (schema.GroupKind → true).
	bumps sync.Map
}

// Ensure makes the child named like desired match desired, with owner as its
// controller. A child matches when every field desired sets (labels,
// annotations and everything outside metadata and status) has the same value
// in the child; fields the API server defaulted are not drift. A drifted child
// is updated with desired's fields laid over it; a missing one is created.
// With MetadataOnly, see there.
func (a *Applier) Ensure(ctx context.Context, owner, desired client.Object) (Op, error) {
	if err := SetController(owner, desired, a.Scheme); err != nil {
		return "", err
	}
	key := client.ObjectKeyFromObject(desired)
	gvk, err := a.Client.GroupVersionKindFor(desired)
	if err != nil {
		return "", err
	}
	if a.MetadataOnly {
		return a.ensureMetadataOnly(ctx, owner, desired, gvk)
	}
	existing := newEmpty(desired)
	err = a.Client.Get(ctx, key, existing)
	if apierrors.IsNotFound(err) {
		if err := a.Client.Create(ctx, desired); err != nil {
			if apierrors.IsAlreadyExists(err) && a.APIReader != nil {
				live := newEmpty(desired)
				if gerr := a.APIReader.Get(ctx, key, live); gerr == nil && !metav1.IsControlledBy(live, owner) {
					return "", &NotControlledError{Kind: gvk.Kind, Key: key}
				}
			}
			return "", err
		}
		return Created, nil
	}
	if err != nil {
		return "", err
	}
	if !metav1.IsControlledBy(existing, owner) {
		return "", &NotControlledError{Kind: gvk.Kind, Key: key}
	}
	updated, err := DriftOwning(desired, existing, a.Owned)
	if err != nil {
		return "", err
	}
	if updated == nil {
		return Unchanged, nil
	}
	if err := a.Client.Update(ctx, updated); err != nil {
		return "", err
	}
	return Updated, nil
}

// Create creates desired with owner as its controller, for children that are
// created once and never updated (Jobs: their pod template is immutable), so
// that nothing of the child but its metadata and status need be cached (it
// never compares a cached child's spec). When a child of that name exists
// already it reads it past the cache (APIReader, which must be set): someone
// else's is a NotControlledError; our own (created by an earlier pass, not
// cached yet) is returned as the AlreadyExists error of the create.
func (a *Applier) Create(ctx context.Context, owner, desired client.Object) error {
	if err := SetController(owner, desired, a.Scheme); err != nil {
		return err
	}
	err := a.Client.Create(ctx, desired)
	if !apierrors.IsAlreadyExists(err) {
		return err
	}
	key := client.ObjectKeyFromObject(desired)
	live := newEmpty(desired)
	if gerr := a.APIReader.Get(ctx, key, live); gerr == nil && !metav1.IsControlledBy(live, owner) {
		gvk, _ := a.Client.GroupVersionKindFor(desired)
		return &NotControlledError{Kind: gvk.Kind, Key: key}
	}
	return err
}

// Drift compares live with desired the way Ensure does: live matches when
// every field desired sets (labels, annotations, owner references, and
// everything outside metadata and status) has the same value in it; fields
// the API server defaulted are not drift. A plain (non-pointer) boolean
// desired leaves false is set too: JSON omits it, but a live true (e.g. a
// child suspended by hand) is drift, reverted to false; an optional *bool
// desired leaves nil stays the API server's. It returns nil for a match,
// else live with desired's fields laid over it, carrying live's
// resourceVersion, ready for an Update.
func Drift(desired, live client.Object) (client.Object, error) {
	return DriftOwning(desired, live, nil)
}

// DriftOwning is Drift where desired also owns the fields at paths owned
// (Applier.Owned): a live value at one desired leaves unset is drift, and
// removed.
func DriftOwning(desired, live client.Object, owned [][]string) (client.Object, error) {
	want, err := runtime.DefaultUnstructuredConverter.ToUnstructured(desired)
	if err != nil {
		return nil, err
	}
	have, err := runtime.DefaultUnstructuredConverter.ToUnstructured(live)
	if err != nil {
		return nil, err
	}
	pruneForCompare(want)
	falses, err := omittedFalse(desired, want, have)
	if err != nil {
		return nil, err
	}
	for _, o := range owned {
		p := make([]any, len(o))
		for i, k := range o {
			p[i] = k
		}
		if _, set := getPath(want, p); set {
			continue
		}
		if _, live := getPath(have, p); live {
			falses = append(falses, p)
		}
	}
	if Subset(want, have) && len(falses) == 0 {
		return nil, nil
	}
	merged := Merge(have, want)
	for _, p := range falses {
		deletePath(merged, p)
	}
	updated := desired.DeepCopyObject().(client.Object)
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(merged, updated); err != nil {
		return nil, err
	}
	updated.SetResourceVersion(live.GetResourceVersion())
	return updated, nil
}

// omittedFalse returns the paths (outside metadata and status) where have
// holds true and want has no value because desired's field there is a plain
// boolean left false (omitempty drops it). A *bool left nil is not one: it
// round-trips as false, not as absent.
func omittedFalse(desired client.Object, want, have map[string]any) ([][]any, error) {
	var cands [][]any
	for k, wv := range want {
		if k == "metadata" || k == "status" {
			continue
		}
		collectTrue(wv, have[k], []any{k}, &cands)
	}
	if len(cands) == 0 {
		return nil, nil
	}
	// Set each candidate false in a copy of have and round-trip it through
	// desired's type: a plain omitempty bool disappears.
	probe := runtime.DeepCopyJSON(have)
	for _, p := range cands {
		setPath(probe, p, false)
	}
	typed := desired.DeepCopyObject()
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(probe, typed); err != nil {
		return nil, err
	}
	back, err := runtime.DefaultUnstructuredConverter.ToUnstructured(typed)
	if err != nil {
		return nil, err
	}
	var out [][]any
	for _, p := range cands {
		if _, ok := getPath(back, p); !ok {
			out = append(out, p)
		}
	}
	return out, nil
}

// collectTrue adds the paths below path where have is true and want (a map
// at that level) has no key, walking maps and same-length lists.
func collectTrue(want, have any, path []any, out *[][]any) {
	switch w := want.(type) {
	case map[string]any:
		h, ok := have.(map[string]any)
		if !ok {
			return
		}
		for k, hv := range h {
			wv, inWant := w[k]
			if !inWant {
				if b, ok := hv.(bool); ok && b {
					*out = append(*out, append(append([]any{}, path...), k))
				}
				continue
			}
			collectTrue(wv, hv, append(append([]any{}, path...), k), out)
		}
	case []any:
		h, ok := have.([]any)
		if !ok || len(h) != len(w) {
			return
		}
		for i := range w {
			collectTrue(w[i], h[i], append(append([]any{}, path...), i), out)
		}
	}
}

func getPath(v any, p []any) (any, bool) {
	for _, k := range p {
		switch key := k.(type) {
		case string:
			m, ok := v.(map[string]any)
			if !ok {
				return nil, false
			}
			if v, ok = m[key]; !ok {
				return nil, false
			}
		case int:
			l, ok := v.([]any)
			if !ok || key >= len(l) {
				return nil, false
			}
			v = l[key]
		}
	}
	return v, true
}

func setPath(v any, p []any, val any) {
	parent, ok := getPath(v, p[:len(p)-1])
	if !ok {
		return
	}
	switch key := p[len(p)-1].(type) {
	case string:
		if m, ok := parent.(map[string]any); ok {
			m[key] = val
		}
	case int:
		if l, ok := parent.([]any); ok && key < len(l) {
			l[key] = val
		}
	}
}

func deletePath(v any, p []any) {
	parent, ok := getPath(v, p[:len(p)-1])
	if !ok {
		return
	}
	if m, ok := parent.(map[string]any); ok {
		if key, ok := p[len(p)-1].(string); ok {
			delete(m, key)
		}
	}
}

// pruneForCompare keeps, of desired's metadata, only what Ensure manages.
func pruneForCompare(want map[string]any) {
	delete(want, "status")
	md, _ := want["metadata"].(map[string]any)
	keep := map[string]any{}
	for _, k := range []string{"labels", "annotations", "ownerReferences", "name", "namespace"} {
		if v, ok := md[k]; ok {
			keep[k] = v
		}
	}
	want["metadata"] = keep
}

// Subset reports whether every value set in want (nil values aside) is equal
// in have. Maps are compared key by key; lists must have the same length and
// match element by element.
func Subset(want, have any) bool {
	switch w := want.(type) {
	case nil:
		return true
	case map[string]any:
		h, ok := have.(map[string]any)
		if !ok {
			return len(w) == 0 && have == nil
		}
		for k, wv := range w {
			if wv == nil {
				continue
			}
			hv, ok := h[k]
			if !ok {
				if isEmpty(wv) {
					continue
				}
				return false
			}
			if !Subset(wv, hv) {
				return false
			}
		}
		return true
	case []any:
		h, ok := have.([]any)
		if !ok {
			return len(w) == 0 && have == nil
		}
		if len(w) != len(h) {
			return false
		}
		for i := range w {
			if !Subset(w[i], h[i]) {
				return false
			}
		}
		return true
	default:
		return reflect.DeepEqual(want, have)
	}
}

func isEmpty(v any) bool {
	switch t := v.(type) {
	case map[string]any:
		return len(t) == 0
	case []any:
		return len(t) == 0
	}
	return false
}

// Merge lays over's values over base: maps merge key by key, anything else
// (lists included) is replaced by over's value. base is modified and returned.
func Merge(base, over map[string]any) map[string]any {
	for k, ov := range over {
		if ov == nil {
			continue
		}
		om, ok := ov.(map[string]any)
		bm, ok2 := base[k].(map[string]any)
		if ok && ok2 {
			base[k] = Merge(bm, om)
			continue
		}
		base[k] = ov
	}
	return base
}

// EnqueueOwnerByLabel maps an event of a child to a request for the one owner
// whose name is the child's label `label`, in the child's namespace. Children
// without the label map to nothing. This is the cure for the full requeue:
// one Pod event, one owner reconciled.
func EnqueueOwnerByLabel(label string) handler.EventHandler {
	return handler.EnqueueRequestsFromMapFunc(func(_ context.Context, obj client.Object) []reconcile.Request {
		if req, ok := OwnerRequest(obj, label); ok {
			return []reconcile.Request{req}
		}
		return nil
	})
}

// OwnerRequest returns the request for obj's owner named by label.
func OwnerRequest(obj client.Object, label string) (reconcile.Request, bool) {
	name := obj.GetLabels()[label]
	if name == "" {
		return reconcile.Request{}, false
	}
	return reconcile.Request{NamespacedName: types.NamespacedName{Namespace: obj.GetNamespace(), Name: name}}, true
}
