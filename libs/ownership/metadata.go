package ownership

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"maps"
	"reflect"
	"strconv"

	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// DefaultAnnotationPrefix prefixes the two annotations of the metadata-only
// mode when Applier.AnnotationPrefix is empty.
const DefaultAnnotationPrefix = "cairn.dev"

// HashAnnotation is the annotation holding the hash of the desired child
// (Hash): "<prefix>/spec-hash".
func (a *Applier) HashAnnotation() string { return a.prefix() + "/spec-hash" }

// GenerationAnnotation is the annotation holding the child's
// metadata.generation at which it last matched that hash:
// "<prefix>/spec-generation". The API server bumps the generation on every
// change outside metadata and status, so an edit by anyone else makes the two
// differ — visible in the metadata alone.
func (a *Applier) GenerationAnnotation() string { return a.prefix() + "/spec-generation" }

func (a *Applier) prefix() string {
	if a.AnnotationPrefix == "" {
		return DefaultAnnotationPrefix
	}
	return a.AnnotationPrefix
}

// Hash hashes what Ensure manages in desired: its labels, annotations (but
// the metadata-only mode's own two, named with prefix), owner references,
// name, namespace and everything outside metadata and status.
func Hash(desired client.Object, prefix string) (string, error) {
	if prefix == "" {
		prefix = DefaultAnnotationPrefix
	}
	want, err := runtime.DefaultUnstructuredConverter.ToUnstructured(desired)
	if err != nil {
		return "", err
	}
	pruneForCompare(want)
	delete(want, "apiVersion")
	delete(want, "kind")
	md := want["metadata"].(map[string]any)
	if ann, ok := md["annotations"].(map[string]any); ok {
		delete(ann, prefix+"/spec-hash")
		delete(ann, prefix+"/spec-generation")
		if len(ann) == 0 {
			delete(md, "annotations")
		}
	}
	b, err := json.Marshal(want) // map keys are sorted: the hash is stable
	if err != nil {
		return "", err
	}
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:16]), nil
}

// ensureMetadataOnly is Ensure for children the cache holds as metadata only:
// create the child when missing; leave it alone when its metadata shows it
// unchanged since it last matched (same hash, same generation, the labels and
// annotations desired sets in place) — no read of the whole object, no write;
// else read it in full past the cache and revert any drift.
func (a *Applier) ensureMetadataOnly(ctx context.Context, owner, desired client.Object, gvk schema.GroupVersionKind) (Op, error) {
	if a.APIReader == nil {
		return "", fmt.Errorf("ownership: MetadataOnly needs an APIReader to read a %s in full", gvk.Kind)
	}
	hash, err := Hash(desired, a.prefix())
	if err != nil {
		return "", err
	}
	key := client.ObjectKeyFromObject(desired)
	cached := &metav1.PartialObjectMetadata{}
	cached.SetGroupVersionKind(gvk)
	err = a.Client.Get(ctx, key, cached)
	if apierrors.IsNotFound(err) {
		created := desired.DeepCopyObject().(client.Object)
		a.setAnnotations(created, hash, 1) // a new object starts at generation 1
		err = a.Client.Create(ctx, created)
		if err == nil {
			if err := a.settle(ctx, created, hash, gvk); err != nil {
				return "", err
			}
			return Created, nil
		}
		if !apierrors.IsAlreadyExists(err) {
			return "", err
		}
		// Not in the cache yet, or no longer (a label the cache selects
		// on was removed): look at the API server's copy.
		return a.reconcileLive(ctx, owner, desired, key, gvk, hash)
	}
	if err != nil {
		return "", err
	}
	if !metav1.IsControlledBy(cached, owner) {
		return "", &NotControlledError{Kind: gvk.Kind, Key: key}
	}
	if a.upToDate(cached, desired, hash) {
		return Unchanged, nil
	}
	return a.reconcileLive(ctx, owner, desired, key, gvk, hash)
}

// upToDate: the cached metadata says the child matched desired (same hash) at
// its current generation, and the labels and annotations desired sets are in
// place (metadata edits do not bump the generation).
func (a *Applier) upToDate(cached client.Object, desired client.Object, hash string) bool {
	ann := cached.GetAnnotations()
	if ann[a.HashAnnotation()] != hash || ann[a.GenerationAnnotation()] != strconv.FormatInt(cached.GetGeneration(), 10) {
		return false
	}
	return containsAll(cached.GetLabels(), desired.GetLabels()) && containsAll(ann, desired.GetAnnotations())
}

func containsAll(have, want map[string]string) bool {
	for k, v := range want {
		if h, ok := have[k]; !ok || h != v {
			return false
		}
	}
	return true
}

// reconcileLive reads the child from the API server and compares it with
// desired as Drift does. A drifted child is updated with desired laid over it;
// a matching one whose annotations are stale gets them refreshed (a metadata
// patch, which does not change its generation; Ensure still reports
// Unchanged).
func (a *Applier) reconcileLive(ctx context.Context, owner, desired client.Object, key types.NamespacedName, gvk schema.GroupVersionKind, hash string) (Op, error) {
	live := newEmpty(desired)
	if err := a.APIReader.Get(ctx, key, live); err != nil {
		return "", err
	}
	if !metav1.IsControlledBy(live, owner) {
		return "", &NotControlledError{Kind: gvk.Kind, Key: key}
	}
	drifted, err := DriftOwning(desired, live, a.Owned)
	if err != nil {
		return "", err
	}
	if drifted == nil {
		ann := live.GetAnnotations()
		if ann[a.HashAnnotation()] == hash && ann[a.GenerationAnnotation()] == strconv.FormatInt(live.GetGeneration(), 10) {
			return Unchanged, nil // the cache was behind
		}
		if err := a.patchAnnotations(ctx, live, hash, gvk); err != nil {
			return "", err
		}
		if err := a.settle(ctx, live, hash, gvk); err != nil {
			return "", err
		}
		return Unchanged, nil
	}
	// The API server bumps the generation when something outside metadata
	// and status changes (and, for some kinds, the annotations); record the
	// generation this write will produce.
	gen := live.GetGeneration()
	changed, err := outsideMetadataDiffers(drifted, live)
	if err != nil {
		return "", err
	}
	if changed {
		gen++
	}
	a.setAnnotations(drifted, hash, gen)
	if !changed && a.annotationsBump(gvk) && !maps.Equal(drifted.GetAnnotations(), live.GetAnnotations()) {
		a.setAnnotations(drifted, hash, gen+1)
	}
	if err := a.Client.Update(ctx, drifted); err != nil {
		return "", err
	}
	if err := a.settle(ctx, drifted, hash, gvk); err != nil {
		return "", err
	}
	return Updated, nil
}

// settle makes the generation annotation of obj, just written, match its
// generation, when the guess was wrong (e.g. a change the API server
// normalised away, or a kind that counts annotation changes). A kind whose
// API server does not maintain metadata.generation cannot be kept in the
// metadata-only mode: that is a programming error, reported loudly.
func (a *Applier) settle(ctx context.Context, obj client.Object, hash string, gvk schema.GroupVersionKind) error {
	for i := 0; ; i++ {
		gen := obj.GetGeneration()
		if gen == 0 {
			return fmt.Errorf("ownership: the API server does not maintain metadata.generation of %s, so edits of it cannot be seen in its metadata; use an Applier without MetadataOnly for it", gvk.Kind)
		}
		if obj.GetAnnotations()[a.GenerationAnnotation()] == strconv.FormatInt(gen, 10) {
			return nil
		}
		if i == 2 {
			return fmt.Errorf("ownership: the generation of %s %s moves with every write of its annotations (now %d)", gvk.Kind, client.ObjectKeyFromObject(obj), gen)
		}
		if err := a.patchAnnotations(ctx, obj, hash, gvk); err != nil {
			return err
		}
	}
}

// patchAnnotations writes the hash and the generation the patch will leave
// obj at. A patch of annotations alone that moves the generation teaches
// the Applier that gvk counts annotation changes.
func (a *Applier) patchAnnotations(ctx context.Context, obj client.Object, hash string, gvk schema.GroupVersionKind) error {
	before := obj.GetGeneration()
	patch := client.MergeFrom(obj.DeepCopyObject().(client.Object))
	gen := before
	if a.annotationsBump(gvk) {
		gen++
	}
	a.setAnnotations(obj, hash, gen)
	if err := a.Client.Patch(ctx, obj, patch); err != nil {
		return err
	}
	if obj.GetGeneration() > before {
		a.bumps.Store(gvk.GroupKind(), true)
	}
	return nil
}

// annotationsBump reports whether the API server bumps the generation of gvk
// when only its annotations change: Deployment does (a legacy of its
// rollback annotation); other kinds are learnt on the first such write.
func (a *Applier) annotationsBump(gvk schema.GroupVersionKind) bool {
	if gvk.GroupKind() == (schema.GroupKind{Group: "apps", Kind: "Deployment"}) {
		return true
	}
	_, ok := a.bumps.Load(gvk.GroupKind())
	return ok
}

func (a *Applier) setAnnotations(obj client.Object, hash string, generation int64) {
	ann := obj.GetAnnotations()
	if ann == nil {
		ann = map[string]string{}
	}
	ann[a.HashAnnotation()] = hash
	ann[a.GenerationAnnotation()] = strconv.FormatInt(generation, 10)
	obj.SetAnnotations(ann)
}

// outsideMetadataDiffers reports whether a and b differ outside metadata,
// status and type meta — what makes the API server bump the generation.
func outsideMetadataDiffers(a, b client.Object) (bool, error) {
	ua, err := runtime.DefaultUnstructuredConverter.ToUnstructured(a)
	if err != nil {
		return false, err
	}
	ub, err := runtime.DefaultUnstructuredConverter.ToUnstructured(b)
	if err != nil {
		return false, err
	}
	for _, k := range []string{"metadata", "status", "apiVersion", "kind"} {
		delete(ua, k)
		delete(ub, k)
	}
	return !equality.Semantic.DeepEqual(ua, ub), nil
}

// newEmpty returns a new zero object of obj's type, to read into: nothing of
// desired can then stand in for a field absent from the response (an
// optional field someone removed), whatever the reader's decoding does.
func newEmpty(obj client.Object) client.Object {
	out := reflect.New(reflect.TypeOf(obj).Elem()).Interface().(client.Object)
	// Unstructured and PartialObjectMetadata need their kind to be read.
	out.GetObjectKind().SetGroupVersionKind(obj.GetObjectKind().GroupVersionKind())
	return out
}
