package references

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	cairnv1 "cairn.dev/apis/meta/v1"
	"cairn.dev/libs/agekeys"
)

// content checks the value of ref.Keys[0] of the Secret or ConfigMap whose
// metadata is m against ref.Content, read live once per resourceVersion;
// the verdict (a problem or none) is remembered, never the value.
func (c *Checker) content(ctx context.Context, ref Ref, m *metav1.PartialObjectMetadata) (*Problem, error) {
	k := verdictKey{uid: m.UID, resourceVersion: m.ResourceVersion, key: ref.Keys[0], content: ref.Content}
	c.mu.Lock()
	p, ok := c.verdicts[k]
	c.mu.Unlock()
	if ok {
		if p == nil {
			return nil, nil
		}
		q := *p
		q.Ref = ref
		return &q, nil
	}
	key := client.ObjectKey{Namespace: ref.Namespace, Name: ref.Name}
	var value []byte
	var found bool
	switch ref.Kind {
	case Secret:
		s := &corev1.Secret{}
		if err := c.Live.Get(ctx, key, s); err != nil && !apierrors.IsNotFound(err) {
			return nil, fmt.Errorf("reading Secret %s: %w", key, err)
		}
		value, found = s.Data[k.key]
		if v, ok := s.StringData[k.key]; ok && !found {
			value, found = []byte(v), true
		}
	case ConfigMap:
		cm := &corev1.ConfigMap{}
		if err := c.Live.Get(ctx, key, cm); err != nil && !apierrors.IsNotFound(err) {
			return nil, fmt.Errorf("reading ConfigMap %s: %w", key, err)
		}
		if v, ok := cm.Data[k.key]; ok {
			value, found = []byte(v), true
		} else {
			value, found = cm.BinaryData[k.key]
		}
	default:
		return nil, fmt.Errorf("references: %s cannot hold %s", ref.Kind, ref.Content)
	}
	var prob *Problem
	switch {
	case !found || len(value) == 0:
		prob = &Problem{Reason: cairnv1.ReferenceKeyMissingReason, Ref: ref, Message: fmt.Sprintf(
			"%s %s/%s (%s) has no key %s; nothing runs until it has", ref.Kind, ref.Namespace, ref.Name, ref.Field, k.key)}
	default:
		var err error
		switch ref.Content {
		case AgeRecipients:
			err = agekeys.CheckRecipients(string(value))
		case AgeIdentities:
			err = agekeys.CheckIdentities(string(value))
		default:
			return nil, fmt.Errorf("references: unknown content %q", ref.Content)
		}
		if err != nil {
			prob = &Problem{Reason: InvalidKeysReason, Ref: ref, Message: fmt.Sprintf(
				"%s %s/%s key %s (%s): %v; nothing runs until it is fixed", ref.Kind, ref.Namespace, ref.Name, k.key, ref.Field, err)}
		}
	}
	c.mu.Lock()
	if c.verdicts == nil {
		c.verdicts = map[verdictKey]*Problem{}
	}
	c.verdicts[k] = prob
	c.mu.Unlock()
	return prob, nil
}
