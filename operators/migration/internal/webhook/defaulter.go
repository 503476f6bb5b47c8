package webhook

import (
	migrationv1 "cairn.dev/apis/migration/v1"
	"cairn.dev/libs/access"
	"cairn.dev/libs/admit"
)

// NewDefaulter is the MigrationJob mutating webhook (libs/admit.Defaulter),
// called on create (and on update, only to sign an object never
// approved): the API's defaults (migrationv1.MigrationJobSpec.SetDefaults —
// what the API server has applied already, so an install without webhooks
// gets the same), migrationv1.CleanupFinalizer, the references signed for
// the Validator to check and the controller to verify. guard nil signs
// nothing (unit tests).
func NewDefaulter(guard *access.Guard) *admit.Defaulter[*migrationv1.MigrationJob] {
	return &admit.Defaulter[*migrationv1.MigrationJob]{Kind: access.MigrationJob, Guard: guard}
}
