// Package webhook holds the migration operator's admission webhooks for
// MigrationJob: defaulting (Defaulter) and validation (Validator). Setup
// registers both with a manager's webhook server.
//
// Both are called on create and update: the spec is immutable except
// spec.cutover.approved, which a human sets to approve a Manual cutover, so
// an update is checked for what it changes (the CRD's CEL rules say the
// same). Deletion is never refused, and the finalizer is added on create
// only, so a MigrationJob stays deletable while the operator is down.
package webhook

import (
	"fmt"

	ctrl "sigs.k8s.io/controller-runtime"

	migrationv1 "cairn.dev/apis/migration/v1"
)

// Paths the webhook server serves; they match the markers below and the
// generated manifests in deploy/migration/webhook/generated.
const (
	MutatePath   = "/mutate-migration-cairn-dev-v1-migrationjob"
	ValidatePath = "/validate-migration-cairn-dev-v1-migrationjob"
)

// +kubebuilder:webhook:path=/mutate-migration-cairn-dev-v1-migrationjob,mutating=true,failurePolicy=fail,sideEffects=None,groups=migration.cairn.dev,resources=migrationjobs,verbs=create,versions=v1,name=mmigrationjob.cairn.dev,admissionReviewVersions=v1
// +kubebuilder:webhook:path=/validate-migration-cairn-dev-v1-migrationjob,mutating=false,failurePolicy=fail,sideEffects=None,groups=migration.cairn.dev,resources=migrationjobs,verbs=create;update,versions=v1,name=vmigrationjob.cairn.dev,admissionReviewVersions=v1

// Setup registers the MigrationJob defaulting and validating webhooks with
// mgr's webhook server.
func Setup(mgr ctrl.Manager) error {
	if gvk := migrationv1.GroupVersion.WithKind("MigrationJob"); !mgr.GetScheme().Recognizes(gvk) {
		return fmt.Errorf("webhook: the manager's scheme has no %s; add it with its package's AddToScheme", gvk)
	}
	return ctrl.NewWebhookManagedBy(mgr, &migrationv1.MigrationJob{}).
		WithDefaulter(&Defaulter{}).
		WithValidator(&Validator{}).
		Complete()
}
