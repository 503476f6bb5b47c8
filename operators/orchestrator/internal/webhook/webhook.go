// Package webhook holds the orchestrator's admission webhooks for
// ProtectionPlan: defaulting (Defaulter) and validation (Validator). Setup
// registers both with a manager's webhook server.
//
// Both are called on create and update: a plan's spec may change (a new
// schedule, other objectives). Deletion is never refused, and the
// finalizer is added on create only, so a plan stays deletable while the
// orchestrator is down.
package webhook

import (
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	migrationv1 "cairn.dev/apis/migration/v1"
	platformv1 "cairn.dev/apis/platform/v1"
	"cairn.dev/libs/access"
	"cairn.dev/libs/admit"
)

// +kubebuilder:webhook:path=/mutate-platform-cairn-dev-v1-protectionplan,mutating=true,failurePolicy=fail,sideEffects=None,groups=platform.cairn.dev,resources=protectionplans,verbs=create;update,versions=v1,name=mprotectionplan.cairn.dev,admissionReviewVersions=v1
// +kubebuilder:webhook:path=/validate-platform-cairn-dev-v1-protectionplan,mutating=false,failurePolicy=fail,sideEffects=None,groups=platform.cairn.dev,resources=protectionplans,verbs=create;update,versions=v1,name=vprotectionplan.cairn.dev,admissionReviewVersions=v1

// The validating webhook asks the API server whether the requester may use
// what the object refers to (libs/access).
// +kubebuilder:rbac:groups=authorization.k8s.io,resources=subjectaccessreviews,verbs=create
//
// It dry-runs the plan's MigrationJob (checkMigration) with the create and
// update the controller already holds on MigrationJobs.

// Setup registers the ProtectionPlan defaulting and validating webhooks
// with mgr's webhook server.
func Setup(mgr ctrl.Manager) error {
	validator := func(guard *access.Guard) admission.Validator[*platformv1.ProtectionPlan] {
		return &Validator{Guard: guard, Client: mgr.GetClient()}
	}
	return admit.Setup(mgr, &platformv1.ProtectionPlan{}, *NewDefaulter(nil), validator, migrationv1.GroupVersion.WithKind("MigrationJob"))
}
