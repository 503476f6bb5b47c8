// Package admit is what every Cairn kind's admission webhooks share: the
// defaulting webhook's head (API defaults, the cleanup finalizer on create,
// the signature over the object's references) and the checks Setup makes
// before registering the webhooks (the manager's scheme knows the kinds the
// webhooks read; an access.Guard is registered).
package admit

import (
	"context"
	"encoding/json"
	"fmt"
	"reflect"

	admissionv1 "k8s.io/api/admission/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/apiutil"
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
// On update (for kinds whose spec may change, Kind.Mutable) it fills defaults
// and signs again, and never adds the finalizer: one removed by hand (the
// escape hatch) stays removed. For the other kinds (spec immutable) it signs
// on update only when the old object was not approved (created while the
// webhook was not installed: the documented re-approval, which the
// validating webhook reviews as a create); an approved object's annotation
// is left as the update sent it, and the validating webhook refuses an
// update that removed or changed it (access.Guard.Admit). An object being
// deleted is left alone, and so is a call without an admission request.
type Defaulter[T client.Object] struct {
	// Kind is the object's kind: what is signed, the finalizer, the
	// defaults, the references, and whether updates are served (Mutable).
	Kind access.Kind[T]
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
		if !d.Kind.Mutable {
			if d.Guard != nil && !d.oldApproved(req) {
				d.Guard.Default(obj, d.Kind.GroupKind, d.Kind.Checks(obj))
			}
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
	d.Kind.Defaults(obj)
	if req.Operation == admissionv1.Create && controllerutil.AddFinalizer(obj, d.Kind.Finalizer) {
		ctrl.LoggerFrom(ctx).V(1).Info("adding finalizer", "finalizer", d.Kind.Finalizer)
	}
	if d.Guard != nil {
		d.Guard.Default(obj, d.Kind.GroupKind, d.Kind.Checks(obj))
	}
	return nil
}

// oldApproved reports whether the request's old object carries an approval
// of its references; an old object that does not decode counts as not
// approved (it is signed again, and the validator reviews every check).
func (d *Defaulter[T]) oldApproved(req admission.Request) bool {
	var zero T
	old, ok := reflect.New(reflect.TypeOf(zero).Elem()).Interface().(T)
	if !ok || len(req.OldObject.Raw) == 0 || json.Unmarshal(req.OldObject.Raw, old) != nil {
		return false
	}
	return d.Guard.Approver.Approved(old, d.Kind.GroupKind, d.Kind.Checks(old))
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

// Setup registers a kind's defaulting and validating webhooks with mgr's
// webhook server: Prepare (the scheme holds obj's kind and reads, the
// operator's access.Guard), then the Defaulter d signing with that guard and
// the validator validator builds with it.
func Setup[T client.Object](mgr ctrl.Manager, obj T, d Defaulter[T], validator func(*access.Guard) admission.Validator[T], reads ...schema.GroupVersionKind) error {
	gvk, err := apiutil.GVKForObject(obj, mgr.GetScheme())
	if err != nil {
		return fmt.Errorf("webhook: %w", err)
	}
	guard, err := Prepare(mgr, append([]schema.GroupVersionKind{gvk}, reads...)...)
	if err != nil {
		return err
	}
	d.Guard = guard
	return ctrl.NewWebhookManagedBy(mgr, obj).WithDefaulter(&d).WithValidator(validator(guard)).Complete()
}
