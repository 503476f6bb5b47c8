// Package webhook holds the migration operator's admission webhooks for
// MigrationJob: defaulting (Defaulter) and validation (Validator). Setup
// registers both with a manager's webhook server.
//
// Both are called on create and update: the spec is immutable except
// spec.cutover.approved, which a human sets to approve a Manual cutover, so
// an update is checked for what it changes (the CRD's CEL rules say the
// same). The approval annotation (libs/access) cannot be removed or
// changed by an update; the defaulting webhook signs on update only an
// object that was never approved. Deletion is never refused, and the
// finalizer is added on create only, so a MigrationJob stays deletable
// while the operator is down (the platform's matchConditions skip the
// webhooks for metadata-only updates but annotation changes).
package webhook

import (
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	migrationv1 "cairn.dev/apis/migration/v1"
	"cairn.dev/libs/access"
	"cairn.dev/libs/admit"
)

// +kubebuilder:webhook:path=/mutate-migration-cairn-dev-v1-migrationjob,mutating=true,failurePolicy=fail,sideEffects=None,groups=migration.cairn.dev,resources=migrationjobs,verbs=create;update,versions=v1,name=mmigrationjob.cairn.dev,admissionReviewVersions=v1
// +kubebuilder:webhook:path=/validate-migration-cairn-dev-v1-migrationjob,mutating=false,failurePolicy=fail,sideEffects=None,groups=migration.cairn.dev,resources=migrationjobs,verbs=create;update,versions=v1,name=vmigrationjob.cairn.dev,admissionReviewVersions=v1

// The validating webhook asks the API server whether the requester may use
// what the object refers to (libs/access).
// +kubebuilder:rbac:groups=authorization.k8s.io,resources=subjectaccessreviews,verbs=create

// Setup registers the MigrationJob defaulting and validating webhooks with
// mgr's webhook server.
//
// images is the spec.image allow-list (--allowed-agent-images); the
// access.Guard is the one the operator's Prepare registered for mgr.
func Setup(mgr ctrl.Manager, images *access.Images) error {
	validator := func(guard *access.Guard) admission.Validator[*migrationv1.MigrationJob] {
		return &Validator{Guard: guard, Images: images, Reader: mgr.GetAPIReader()}
	}
	return admit.Setup(mgr, &migrationv1.MigrationJob{}, *NewDefaulter(nil), validator)
}
