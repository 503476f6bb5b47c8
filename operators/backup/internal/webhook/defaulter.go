package webhook

import (
	"context"
	"encoding/json"
	"fmt"

	admissionv1 "k8s.io/api/admission/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	backupv1 "cairn.dev/apis/backup/v1"
	backupv1alpha1 "cairn.dev/apis/backup/v1alpha1"
	"cairn.dev/libs/access"
)

// Defaulter is the BackupJob mutating webhook: it fills the API's defaults
// (backupv1.BackupJobSpec.SetDefaults) on create and update, and adds
// backupv1.CleanupFinalizer on create, so the controller needs no extra write
// for it. It never adds the finalizer on update: a finalizer removed by hand
// (the escape hatch) stays removed. Last, it signs the BackupJob's
// references into the annotation access.Annotation (libs/access): the
// Validator checks the requester may use them, the controller acts only on
// a BackupJob whose annotation approves its references.
//
// The defaults are the API's own, not the webhook's: for a v1 request the API
// server has applied them already (the CRD's +kubebuilder:default markers,
// and the port from the deploy base's MutatingAdmissionPolicy), so an install
// without webhooks gets the same. A v1alpha1 request, converted to v1 for this
// webhook, lacks the v1-only fields; filling them here stores them.
type Defaulter struct {
	// Guard signs the references; nil signs nothing (unit tests).
	Guard *access.Guard
}

var _ admission.Defaulter[*backupv1.BackupJob] = &Defaulter{}

// Default implements admission.Defaulter. Which operation it serves comes
// from the admission request in ctx; without one it only fills defaults.
func (d *Defaulter) Default(ctx context.Context, bj *backupv1.BackupJob) error {
	req, reqErr := admission.RequestFromContext(ctx)
	if _, legacy := bj.Annotations[backupv1alpha1.LegacyShapeAnnotation]; legacy {
		// A v1alpha1 object without its v1 fields (an old manifest): on
		// update, the stored object's v1-only fields stay, rather than
		// being reset to the legacy defaults the conversion filled in.
		delete(bj.Annotations, backupv1alpha1.LegacyShapeAnnotation)
		if reqErr == nil && req.Operation == admissionv1.Update {
			old := &backupv1.BackupJob{}
			if err := json.Unmarshal(req.OldObject.Raw, old); err != nil {
				return fmt.Errorf("reading the stored BackupJob to keep its v1 fields: %w", err)
			}
			backupv1alpha1.KeepV1Fields(bj, old)
			ctrl.LoggerFrom(ctx).Info("a v1alpha1 update without the v1 fields keeps the stored ones", "annotation", backupv1alpha1.V1FieldsAnnotation)
		}
	}
	bj.Spec.SetDefaults()
	if reqErr == nil && req.Operation == admissionv1.Create && bj.DeletionTimestamp.IsZero() {
		if controllerutil.AddFinalizer(bj, backupv1.CleanupFinalizer) {
			ctrl.LoggerFrom(ctx).V(1).Info("adding finalizer", "finalizer", backupv1.CleanupFinalizer)
		}
	}
	if d.Guard != nil {
		d.Guard.Default(bj, access.BackupJobKind, access.BackupJobChecks(bj))
	}
	return nil
}
