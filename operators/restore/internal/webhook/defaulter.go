package webhook

import (
	restorev1 "cairn.dev/apis/restore/v1"
	"cairn.dev/libs/access"
	"cairn.dev/libs/admit"
)

// NewDefaulter is the RestoreJob mutating webhook (libs/admit.Defaulter),
// called on create only (the spec is immutable): the API's defaults
// (restorev1.RestoreJobSpec.SetDefaults: maxRetries, activeDeadlineSeconds,
// the engine's port — what the API server has applied already, so an
// install without webhooks gets the same), restorev1.CleanupFinalizer, the
// references signed. guard nil signs nothing (unit tests).
func NewDefaulter(guard *access.Guard) *admit.Defaulter[*restorev1.RestoreJob] {
	return &admit.Defaulter[*restorev1.RestoreJob]{Kind: access.RestoreJob, Guard: guard}
}
