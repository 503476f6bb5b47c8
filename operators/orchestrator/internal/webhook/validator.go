package webhook

import (
	"context"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	platformv1 "cairn.dev/apis/platform/v1"
	"cairn.dev/libs/access"
	"cairn.dev/operators/orchestrator/internal/planspec"
)

// Validator is the ProtectionPlan validating webhook. It rejects what the
// CRD schema cannot check — a cron that does not parse, an unknown time
// zone, a malformed host or endpoint, durations under a minute, and a
// scratch database that is the protected one — with one message per field
// that names the field and the fix.
type Validator struct {
	// Guard reviews the requester's rights (libs/access); nil skips it.
	Guard *access.Guard
	// Client makes the dry run of the plan's MigrationJob (checkMigration);
	// nil skips it.
	Client client.Client
}

var _ admission.Validator[*platformv1.ProtectionPlan] = &Validator{}

// validate is every check of planspec.Validate; on create or an update of
// old that changes it, an rpo that cannot be met between two scheduled
// backups (planspec.RPOFeasible) is a warning, not a refusal: a plan may
// be backed up by run-now requests or another scheduler (the e2e plans
// are), and ObjectivesMet reports the rpo missed either way.
func validate(old, plan *platformv1.ProtectionPlan) (admission.Warnings, error) {
	plan = plan.DeepCopy()
	planspec.SetDefaults(&plan.Spec)
	errs := planspec.Validate(plan.Name, plan.Namespace, &plan.Spec)
	var oldSpec *platformv1.ProtectionPlanSpec
	if old != nil {
		oldSpec = old.Spec.DeepCopy()
		planspec.SetDefaults(oldSpec)
	}
	if len(errs) > 0 {
		return nil, apierrors.NewInvalid(platformv1.GroupVersion.WithKind("ProtectionPlan").GroupKind(), plan.Name, errs)
	}
	warnings := planspec.PointInTimeWarnings(&plan.Spec)
	if ferr := planspec.RPOFeasible(&plan.Spec, oldSpec, time.Now(), field.NewPath("spec")); ferr != nil {
		warnings = append(warnings, ferr.Error())
	}
	return warnings, nil
}

// ValidateCreate implements admission.Validator.
func (v *Validator) ValidateCreate(ctx context.Context, plan *platformv1.ProtectionPlan) (admission.Warnings, error) {
	w, err := validate(nil, plan)
	if err != nil {
		return w, err
	}
	if _, err := v.admit(ctx, nil, plan); err != nil {
		return nil, err
	}
	mw, err := v.checkMigration(ctx, plan)
	return append(w, mw...), err
}

// admit checks the requester's rights on what the plan refers to — its
// children will use them with the child operators' identities (libs/access):
// every reference on create; on update, the references it adds, and every
// one again when it changes where a credential or the data goes (the
// database, the store, recipients, Object Lock, the scratch database
// spec.verification.restoreInto, the migration template's servers), plus
// what removing encryption needs (the verification identity), warned.
func (v *Validator) admit(ctx context.Context, old, plan *platformv1.ProtectionPlan) (admission.Warnings, error) {
	if v.Guard == nil {
		return nil, nil
	}
	gr := platformv1.GroupVersion.WithResource("protectionplans").GroupResource()
	if old == nil {
		return nil, v.Guard.Admit(ctx, gr, access.ProtectionPlanKind, plan, nil, access.ProtectionPlanChecks(plan), nil)
	}
	weak := access.ProtectionPlanWeakening(old, plan)
	return weak.Warnings, v.Guard.Admit(ctx, gr, access.ProtectionPlanKind, plan, old,
		access.ProtectionPlanChecks(plan), access.ProtectionPlanChecks(old), weak.Checks...)
}

// ValidateUpdate implements admission.Validator. A plan being deleted is
// not checked, so its finalizer can always be removed.
func (v *Validator) ValidateUpdate(ctx context.Context, old, plan *platformv1.ProtectionPlan) (admission.Warnings, error) {
	if !plan.DeletionTimestamp.IsZero() {
		return nil, nil
	}
	w, err := validate(old, plan)
	if err != nil {
		return w, err
	}
	aw, err := v.admit(ctx, old, plan)
	w = append(w, aw...)
	if err != nil {
		return w, err
	}
	mw, err := v.checkMigration(ctx, plan)
	return append(w, mw...), err
}

// ValidateDelete implements admission.Validator; deletion is never refused.
func (*Validator) ValidateDelete(context.Context, *platformv1.ProtectionPlan) (admission.Warnings, error) {
	return nil, nil
}
