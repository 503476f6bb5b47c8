package webhook

import (
	"context"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	platformv1 "cairn.dev/apis/platform/v1"
	"cairn.dev/operators/orchestrator/internal/planspec"
)

// Validator is the ProtectionPlan validating webhook. It rejects what the
// CRD schema cannot check — a cron that does not parse, an unknown time
// zone, a malformed host or endpoint, durations under a minute, and a
// scratch database that is the protected one — with one message per field
// that names the field and the fix.
type Validator struct{}

var _ admission.Validator[*platformv1.ProtectionPlan] = &Validator{}

func validate(plan *platformv1.ProtectionPlan) (admission.Warnings, error) {
	plan = plan.DeepCopy()
	planspec.SetDefaults(&plan.Spec)
	errs := planspec.ValidateName(plan.Name)
	errs = append(errs, planspec.ValidateSpec(&plan.Spec, field.NewPath("spec"))...)
	errs = append(errs, planspec.ValidateDatabases(&plan.Spec, plan.Namespace, field.NewPath("spec"))...)
	if len(errs) > 0 {
		return nil, apierrors.NewInvalid(platformv1.GroupVersion.WithKind("ProtectionPlan").GroupKind(), plan.Name, errs)
	}
	return nil, nil
}

// ValidateCreate implements admission.Validator.
func (*Validator) ValidateCreate(_ context.Context, plan *platformv1.ProtectionPlan) (admission.Warnings, error) {
	return validate(plan)
}

// ValidateUpdate implements admission.Validator. A plan being deleted is
// not checked, so its finalizer can always be removed.
func (*Validator) ValidateUpdate(_ context.Context, _, plan *platformv1.ProtectionPlan) (admission.Warnings, error) {
	if !plan.DeletionTimestamp.IsZero() {
		return nil, nil
	}
	return validate(plan)
}

// ValidateDelete implements admission.Validator; deletion is never refused.
func (*Validator) ValidateDelete(context.Context, *platformv1.ProtectionPlan) (admission.Warnings, error) {
	return nil, nil
}
