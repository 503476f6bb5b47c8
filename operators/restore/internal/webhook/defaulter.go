package webhook

import (
	"context"

	admissionv1 "k8s.io/api/admission/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	restorev1 "cairn.dev/apis/restore/v1"
)

// Defaulter is the RestoreJob mutating webhook, called on create: it fills
// the API's defaults (restorev1.RestoreJobSpec.SetDefaults: maxRetries,
// activeDeadlineSeconds, the engine's port — what the API server has applied
// already, so an install without webhooks gets the same) and adds
// restorev1.CleanupFinalizer, so the controller needs no extra write for it.
type Defaulter struct{}

var _ admission.Defaulter[*restorev1.RestoreJob] = &Defaulter{}

// Default implements admission.Defaulter. Outside a create request (no
// admission request in ctx, or another operation) it changes nothing: the
// spec is immutable, and a finalizer removed by hand stays removed.
func (*Defaulter) Default(ctx context.Context, rj *restorev1.RestoreJob) error {
	req, err := admission.RequestFromContext(ctx)
	if err != nil || req.Operation != admissionv1.Create {
		return nil
	}
	rj.Spec.SetDefaults()
	if rj.DeletionTimestamp.IsZero() && controllerutil.AddFinalizer(rj, restorev1.CleanupFinalizer) {
		ctrl.LoggerFrom(ctx).V(1).Info("adding finalizer", "finalizer", restorev1.CleanupFinalizer)
	}
	return nil
}
