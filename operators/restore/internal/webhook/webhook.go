// Package webhook holds the restore operator's admission webhooks for
// RestoreJob: defaulting (Defaulter) and validation (Validator). Setup
// registers both with a manager's webhook server.
//
// Both are called on create and update. The spec is immutable (a CEL rule
// in the CRD), so an update can change no field they look at but the
// approval annotation (libs/access): an update may not remove or change it
// (refused); the defaulting webhook signs on update only an object that was
// never approved (reviewed as a create). The platform's matchConditions
// skip both for metadata-only updates other than annotation changes, so a
// RestoreJob stays deletable and its finalizer removable while the
// operator is down.
package webhook

import (
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	backupv1 "cairn.dev/apis/backup/v1"
	restorev1 "cairn.dev/apis/restore/v1"
	"cairn.dev/libs/access"
	"cairn.dev/libs/admit"
)

// +kubebuilder:webhook:path=/mutate-restore-cairn-dev-v1-restorejob,mutating=true,failurePolicy=fail,sideEffects=None,groups=restore.cairn.dev,resources=restorejobs,verbs=create;update,versions=v1,name=mrestorejob.cairn.dev,admissionReviewVersions=v1
// +kubebuilder:webhook:path=/validate-restore-cairn-dev-v1-restorejob,mutating=false,failurePolicy=fail,sideEffects=None,groups=restore.cairn.dev,resources=restorejobs,verbs=create;update,versions=v1,name=vrestorejob.cairn.dev,admissionReviewVersions=v1

// The validating webhook asks the API server whether the requester may use
// what the object refers to (libs/access).
// +kubebuilder:rbac:groups=authorization.k8s.io,resources=subjectaccessreviews,verbs=create

// Setup registers the RestoreJob defaulting and validating webhooks with
// mgr's webhook server. The validator reads BackupJobs past the cache
// (mgr.GetAPIReader), so the manager's scheme must hold backup.cairn.dev/v1.
func Setup(mgr ctrl.Manager) error {
	validator := func(guard *access.Guard) admission.Validator[*restorev1.RestoreJob] {
		return &Validator{Reader: mgr.GetAPIReader(), Guard: guard}
	}
	return admit.Setup(mgr, &restorev1.RestoreJob{}, *NewDefaulter(nil), validator, backupv1.GroupVersion.WithKind("BackupJob"))
}
