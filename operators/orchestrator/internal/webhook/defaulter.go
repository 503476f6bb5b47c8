package webhook

import (
	platformv1 "cairn.dev/apis/platform/v1"
	"cairn.dev/libs/access"
	"cairn.dev/libs/admit"
)

// NewDefaulter is the ProtectionPlan mutating webhook (libs/admit.Defaulter),
// on create and update (access.ProtectionPlan): the defaults (platformv1.ProtectionPlanSpec.SetDefaults: time zone UTC,
// retention 7 days, retries 3, deadlines 3600 s, history limits 3, the
// engine's ports, deletionPolicy Retain), platformv1.CleanupFinalizer on
// create, the plan's references signed for the Validator to check and the
// controller to verify. guard nil signs nothing (unit tests).
func NewDefaulter(guard *access.Guard) *admit.Defaulter[*platformv1.ProtectionPlan] {
	return &admit.Defaulter[*platformv1.ProtectionPlan]{Kind: access.ProtectionPlan, Guard: guard}
}
