package webhook

import (
	"context"
	"encoding/json"
	"fmt"

	admissionv1 "k8s.io/api/admission/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	backupv1 "cairn.dev/apis/backup/v1"
	backupv1alpha1 "cairn.dev/apis/backup/v1alpha1"
	"cairn.dev/libs/access"
	"cairn.dev/libs/admit"
)

// NewDefaulter is the BackupJob mutating webhook (libs/admit.Defaulter), on
// create and update: the API's defaults (backupv1.BackupJobSpec.SetDefaults),
// backupv1.CleanupFinalizer on create, the references signed. guard nil
// signs nothing (unit tests).
//
// The defaults are the API's own, not the webhook's: for a v1 request the API
// server has applied them already (the CRD's +kubebuilder:default markers,
// and the port from the deploy base's MutatingAdmissionPolicy), so an install
// without webhooks gets the same. A v1alpha1 request, converted to v1 for this
// webhook, lacks the v1-only fields; filling them here stores them.
func NewDefaulter(guard *access.Guard) *admit.Defaulter[*backupv1.BackupJob] {
	return &admit.Defaulter[*backupv1.BackupJob]{Kind: access.BackupJob, Before: keepV1Fields, Guard: guard}
}

// keepV1Fields: a v1alpha1 object without its v1 fields (an old manifest)
// keeps, on update, the stored object's v1-only fields rather than having
// them reset to the legacy defaults the conversion filled in.
func keepV1Fields(ctx context.Context, req admission.Request, bj *backupv1.BackupJob) error {
	if _, legacy := bj.Annotations[backupv1alpha1.LegacyShapeAnnotation]; !legacy {
		return nil
	}
	delete(bj.Annotations, backupv1alpha1.LegacyShapeAnnotation)
	if req.Operation != admissionv1.Update {
		return nil
	}
	old := &backupv1.BackupJob{}
	if err := json.Unmarshal(req.OldObject.Raw, old); err != nil {
		return fmt.Errorf("reading the stored BackupJob to keep its v1 fields: %w", err)
	}
	backupv1alpha1.KeepV1Fields(bj, old)
	ctrl.LoggerFrom(ctx).Info("a v1alpha1 update without the v1 fields keeps the stored ones", "annotation", backupv1alpha1.V1FieldsAnnotation)
	return nil
}
