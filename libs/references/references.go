// Package references checks the objects a spec refers to — credentials
// Secrets and the keys they must hold, PVCs — before anything runs with them,
// so a missing or unusable reference is a clear condition ("Secret
// default/orders-db-credentials: no key password") instead of pods stuck in
// CreateContainerConfigError until a deadline.
//
// Secrets are never cached with their data: the operator watches Secrets
// and PVCs as metadata only (for existence, and so their events wake the
// objects that refer to them), and reads a Secret's keys past the cache
// only when its resourceVersion changed since it last looked. The keys'
// names are remembered, never the values.
package references

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"sync"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	cairnv1 "cairn.dev/apis/meta/v1"
	"cairn.dev/libs/ownership"
)

// Kinds a Ref can name.
const (
	Secret    = "Secret"
	PVC       = "PersistentVolumeClaim"
	ConfigMap = "ConfigMap"
)

// IndexField is the field index (libs/ownership.IndexReferences) under which
// every kind indexes the objects it refers to, so their events wake exactly
// the referrers (ownership.EnqueueReferrers).
const IndexField = "cairn.dev/references"

var gvks = map[string]schema.GroupVersionKind{
	Secret:    corev1.SchemeGroupVersion.WithKind("Secret"),
	PVC:       corev1.SchemeGroupVersion.WithKind("PersistentVolumeClaim"),
	ConfigMap: corev1.SchemeGroupVersion.WithKind("ConfigMap"),
}

// Ref is one referenced object.
type Ref struct {
	// Kind is Secret, PersistentVolumeClaim or ConfigMap (checked for
	// existence only: a ConfigMap's keys are not read).
	Kind string
	// Namespace and Name of the object.
	Namespace, Name string
	// Keys a Secret must hold.
	Keys []string
	// Field is the spec field that refers to it, for the message
	// (e.g. "spec.database.credentialsSecretRef").
	Field string
	// Content, when set, is what the value of Keys[0] (of a Secret or a
	// ConfigMap) must be: AgeRecipients or AgeIdentities. It is read live
	// and checked (libs/agekeys); only the verdict is remembered, per
	// resourceVersion, never the value.
	Content string
}

// Contents a Ref can require.
const (
	// AgeRecipients: age X25519 public keys, one per line.
	AgeRecipients = "age recipients"
	// AgeIdentities: age X25519 private keys, one per line.
	AgeIdentities = "age identities"
)

// InvalidKeysReason is the Stalled reason of a reference whose value is not
// what Content requires (e.g. a recipient that is not an age public key).
const InvalidKeysReason = "InvalidKeys"

// Reference is ref as libs/ownership indexes it.
func (ref Ref) Reference() ownership.Reference {
	return ownership.Reference{GroupKind: gvks[ref.Kind].GroupKind(), NamespacedName: types.NamespacedName{Namespace: ref.Namespace, Name: ref.Name}}
}

// References converts refs for ownership.IndexReferences.
func References(refs []Ref) []ownership.Reference {
	out := make([]ownership.Reference, 0, len(refs))
	for _, r := range refs {
		out = append(out, r.Reference())
	}
	return out
}

// GroupKind of a Ref kind, for ownership.EnqueueReferrers.
func GroupKind(kind string) schema.GroupKind { return gvks[kind].GroupKind() }

// Metadata is an object of kind as metadata only: what a controller
// watches of a referenced kind (never a Secret's data).
func Metadata(kind string) *metav1.PartialObjectMetadata {
	m := &metav1.PartialObjectMetadata{}
	m.SetGroupVersionKind(gvks[kind])
	return m
}

// Problem is the first unusable reference found.
type Problem struct {
	// Reason is cairnv1.ReferenceNotFoundReason or ReferenceKeyMissingReason.
	Reason string
	// Message names the object, the key and the field.
	Message string
	// Ref is the reference at fault.
	Ref Ref
}

// Checker checks Refs.
type Checker struct {
	// Metadata reads objects' metadata, normally from a metadata-only cache.
	Metadata client.Reader
	// Live reads a Secret's data past the cache (the manager's APIReader).
	Live client.Reader

	mu       sync.Mutex
	keys     map[types.UID]secretKeys
	verdicts map[verdictKey]*Problem
}

type verdictKey struct {
	uid                           types.UID
	resourceVersion, key, content string
}

type secretKeys struct {
	resourceVersion string
	names           map[string]bool
}

// Check returns the first problem among refs, nil when all are usable, or an
// error when the API server could not tell.
func (c *Checker) Check(ctx context.Context, refs []Ref) (*Problem, error) {
	for _, ref := range refs {
		p, err := c.check(ctx, ref)
		if err != nil || p != nil {
			return p, err
		}
	}
	return nil, nil
}

func (c *Checker) check(ctx context.Context, ref Ref) (*Problem, error) {
	gvk, ok := gvks[ref.Kind]
	if !ok {
		return nil, fmt.Errorf("references: unknown kind %q", ref.Kind)
	}
	m := &metav1.PartialObjectMetadata{}
	m.SetGroupVersionKind(gvk)
	key := client.ObjectKey{Namespace: ref.Namespace, Name: ref.Name}
	if err := c.Metadata.Get(ctx, key, m); err != nil {
		if apierrors.IsNotFound(err) {
			return &Problem{Reason: cairnv1.ReferenceNotFoundReason, Ref: ref, Message: fmt.Sprintf(
				"%s %s/%s (%s) not found; nothing runs until it exists", ref.Kind, ref.Namespace, ref.Name, ref.Field)}, nil
		}
		return nil, fmt.Errorf("reading %s %s: %w", ref.Kind, key, err)
	}
	if ref.Content != "" && len(ref.Keys) > 0 {
		return c.content(ctx, ref, m)
	}
	if ref.Kind != Secret || len(ref.Keys) == 0 {
		return nil, nil
	}
	have, err := c.secretKeys(ctx, key, m)
	if err != nil {
		return nil, err
	}
	var missing []string
	for _, k := range ref.Keys {
		if !have[k] {
			missing = append(missing, k)
		}
	}
	if len(missing) == 0 {
		return nil, nil
	}
	sort.Strings(missing)
	return &Problem{Reason: cairnv1.ReferenceKeyMissingReason, Ref: ref, Message: fmt.Sprintf(
		"Secret %s/%s (%s) has no key %s; nothing runs until it has", ref.Namespace, ref.Name, ref.Field, strings.Join(missing, ", "))}, nil
}

// secretKeys returns the names of the keys of a Secret whose metadata is m,
// read live once per resourceVersion.
func (c *Checker) secretKeys(ctx context.Context, key client.ObjectKey, m *metav1.PartialObjectMetadata) (map[string]bool, error) {
	c.mu.Lock()
	if k, ok := c.keys[m.UID]; ok && k.resourceVersion == m.ResourceVersion {
		c.mu.Unlock()
		return k.names, nil
	}
	c.mu.Unlock()
	s := &corev1.Secret{}
	if err := c.Live.Get(ctx, key, s); err != nil {
		if apierrors.IsNotFound(err) {
			return map[string]bool{}, nil
		}
		return nil, fmt.Errorf("reading Secret %s: %w", key, err)
	}
	names := map[string]bool{}
	for k, v := range s.Data {
		if len(v) > 0 {
			names[k] = true
		}
	}
	for k, v := range s.StringData {
		if v != "" {
			names[k] = true
		}
	}
	c.mu.Lock()
	if c.keys == nil {
		c.keys = map[types.UID]secretKeys{}
	}
	c.keys[s.UID] = secretKeys{resourceVersion: s.ResourceVersion, names: names}
	c.mu.Unlock()
	return names, nil
}

// Forget drops what the checker remembers of a Secret (on its deletion).
func (c *Checker) Forget(uid types.UID) {
	c.mu.Lock()
	delete(c.keys, uid)
	for k := range c.verdicts {
		if k.uid == uid {
			delete(c.verdicts, k)
		}
	}
	c.mu.Unlock()
}
