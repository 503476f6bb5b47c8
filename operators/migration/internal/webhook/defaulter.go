package webhook

import (
	"context"

	admissionv1 "k8s.io/api/admission/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	migrationv1 "cairn.dev/apis/migration/v1"
	"cairn.dev/libs/access"
)

// Defaulter is the MigrationJob mutating webhook, called on create: it fills
// the API's defaults (migrationv1.MigrationJobSpec.SetDefaults — what the
// API server has applied already, so an install without webhooks gets the
// same) and adds migrationv1.CleanupFinalizer.
//
// Last it signs the MigrationJob's references (libs/access) for the
// Validator to check and the controller to verify.
type Defaulter struct {
	// Guard signs the references; nil signs nothing (unit tests).
	Guard *access.Guard
}

var _ admission.Defaulter[*migrationv1.MigrationJob] = &Defaulter{}

// Default implements admission.Defaulter. Outside a create request it
// changes nothing.
func (d *Defaulter) Default(ctx context.Context, mj *migrationv1.MigrationJob) error {
	req, err := admission.RequestFromContext(ctx)
	if err != nil || req.Operation != admissionv1.Create {
		return nil
	}
	mj.Spec.SetDefaults()
	if mj.DeletionTimestamp.IsZero() && controllerutil.AddFinalizer(mj, migrationv1.CleanupFinalizer) {
		ctrl.LoggerFrom(ctx).V(1).Info("adding finalizer", "finalizer", migrationv1.CleanupFinalizer)
	}
	if d.Guard != nil {
		d.Guard.Default(mj, access.MigrationJobKind, access.MigrationJobChecks(mj))
	}
	return nil
}
