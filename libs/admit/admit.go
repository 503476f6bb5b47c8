// Package admit is what every Cairn kind's admission webhooks share: the
// defaulting webhook's head (API defaults, the cleanup finalizer on create,
// the signature over the object's references) and the checks Setup makes
// before registering the webhooks (the manager's scheme knows the kinds the
// webhooks read; an access.Guard is registered).
package admit

import (
	"context"
	"fmt"

	admissionv1 "k8s.io/api/admission/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	"cairn.dev/libs/access"
)

// Defaulter is a kind's mutating webhook. On create it fills the API's
// defaults (the kind's own SetDefaults: what the API server applied
// already from the CRD's markers, so an install without webhooks stores
// the same), adds the kind's cleanup finalizer so the controller needs no
// write for it, and last signs the object's references into
// access.Annotation (libs/access): the validating webhook checks the
// requester may use them, the controller acts only on an object whose
// annotation approves its references.
//
// On update (for kinds whose spec may change, OnUpdate) it fills defaults
// and signs again, and never adds the finalizer: one removed by hand (the
// escape hatch) stays removed. An object being deleted is left alone, and
// so is a call without an admission request.
type Defaulter[T client.Object] struct {
	// Kind is the object's kind, bound into the signature.
	Kind schema.GroupKind
	// Finalizer is the kind's cleanup finalizer.
	Finalizer string
	// Defaults fills the API's defaults into obj.
	Defaults func(obj T)
	// Checks are obj's references (access.<Kind>Checks).
	Checks func(obj T) []access.Check
	// OnUpdate serves updates too (a mutable spec).
	OnUpdate bool
	// Before, when set, runs first, with the request (the backup kind keeps
	// the v1-only fields of an old v1alpha1 manifest here).
	Before func(ctx context.Context, req admission.Request, obj T) error
	// Guard signs the references; nil signs nothing (unit tests).
	Guard *access.Guard
}

// Default implements admission.Defaulter.
func (d *Defaulter[T]) Default(ctx context.Context, obj T) error {
	req, err := admission.RequestFromContext(ctx)
	if err != nil || !obj.GetDeletionTimestamp().IsZero() {
		return nil
	}
	switch req.Operation {
	case admissionv1.Create:
	case admissionv1.Update:
		if !d.OnUpdate {
			return nil
		}
	default:
		return nil
	}
	if d.Before != nil {
		if err := d.Before(ctx, req, obj); err != nil {
			return err
		}
	}
	d.Defaults(obj)
	if req.Operation == admissionv1.Create && controllerutil.AddFinalizer(obj, d.Finalizer) {
		ctrl.LoggerFrom(ctx).V(1).Info("adding finalizer", "finalizer", d.Finalizer)
	}
	if d.Guard != nil {
		d.Guard.Default(obj, d.Kind, d.Checks(obj))
	}
	return nil
}

// Prepare is the head of a webhook package's Setup: it fails when mgr's
// scheme lacks any of kinds (the webhooks' own kind and what they read —
// a kind missing there would only fail at the first request) and returns
// the access.Guard the operator's Prepare registered for mgr.
func Prepare(mgr ctrl.Manager, kinds ...schema.GroupVersionKind) (*access.Guard, error) {
	for _, gvk := range kinds {
		if !mgr.GetScheme().Recognizes(gvk) {
			return nil, fmt.Errorf("webhook: the manager's scheme has no %s; add it with its API package's AddToScheme", gvk)
		}
	}
	guard := access.For(mgr)
	if guard == nil {
		return nil, fmt.Errorf("webhook: no access.Guard registered for the manager (the operator's Prepare registers it)")
	}
	return guard, nil
}
