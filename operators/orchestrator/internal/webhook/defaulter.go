package webhook

import (
	"context"

	admissionv1 "k8s.io/api/admission/v1"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	platformv1 "cairn.dev/apis/platform/v1"
	"cairn.dev/libs/access"
	"cairn.dev/operators/orchestrator/internal/planspec"
)

// Defaulter is the ProtectionPlan mutating webhook: it fills the defaults
// (planspec.SetDefaults: time zone UTC, retention 7 days, retries 3,
// deadlines 3600 s, history limits 3, the engine's ports, deletionPolicy
// Retain) on create and update, and adds platformv1.CleanupFinalizer on
// create.
//
// Last it signs the plan's references (libs/access) for the Validator to
// check and the controller to verify.
type Defaulter struct {
	// Guard signs the references; nil signs nothing (unit tests).
	Guard *access.Guard
}

var _ admission.Defaulter[*platformv1.ProtectionPlan] = &Defaulter{}

// Default implements admission.Defaulter.
func (d *Defaulter) Default(ctx context.Context, plan *platformv1.ProtectionPlan) error {
	req, err := admission.RequestFromContext(ctx)
	if err != nil {
		return nil
	}
	if !plan.DeletionTimestamp.IsZero() {
		return nil
	}
	planspec.SetDefaults(&plan.Spec)
	if req.Operation == admissionv1.Create {
		controllerutil.AddFinalizer(plan, platformv1.CleanupFinalizer)
	}
	if d.Guard != nil {
		d.Guard.Default(plan, access.ProtectionPlanKind, access.ProtectionPlanChecks(plan))
	}
	return nil
}
