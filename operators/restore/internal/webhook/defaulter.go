package webhook

import (
	"context"

	admissionv1 "k8s.io/api/admission/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	restorev1 "cairn.dev/apis/restore/v1"
	"cairn.dev/libs/access"
)

// Defaulter is the RestoreJob mutating webhook, called on create: it fills
// the API's defaults (restorev1.RestoreJobSpec.SetDefaults: maxRetries,
// activeDeadlineSeconds, the engine's port — what the API server has applied
// already, so an install without webhooks gets the same) and adds
// restorev1.CleanupFinalizer, so the controller needs no extra write for it.
// Last it signs the RestoreJob's references (libs/access) for the
// Validator to check and the controller to verify.
type Defaulter struct {
	// Guard signs the references; nil signs nothing (unit tests).
	Guard *access.Guard
}

var _ admission.Defaulter[*restorev1.RestoreJob] = &Defaulter{}

// Default implements admission.Defaulter. Outside a create request (no
// admission request in ctx, or another operation) it changes nothing: the
// spec is immutable, and a finalizer removed by hand stays removed.
func (d *Defaulter) Default(ctx context.Context, rj *restorev1.RestoreJob) error {
	req, err := admission.RequestFromContext(ctx)
	if err != nil || req.Operation != admissionv1.Create {
		return nil
	}
	rj.Spec.SetDefaults()
	if rj.DeletionTimestamp.IsZero() && controllerutil.AddFinalizer(rj, restorev1.CleanupFinalizer) {
		ctrl.LoggerFrom(ctx).V(1).Info("adding finalizer", "finalizer", restorev1.CleanupFinalizer)
	}
	if d.Guard != nil {
		d.Guard.Default(rj, access.RestoreJobKind, access.RestoreJobChecks(rj))
	}
	return nil
}
