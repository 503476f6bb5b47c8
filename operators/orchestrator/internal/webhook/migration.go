package webhook

import (
	"context"
	"fmt"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	migrationv1 "cairn.dev/apis/migration/v1"
	platformv1 "cairn.dev/apis/platform/v1"
	"cairn.dev/operators/orchestrator/internal/planspec"
)

// checkMigration has the migration operator's admission judge the
// MigrationJob plan's spec.migration makes, by a server-side dry run of
// its create (or of the update of the plan's existing one) as the
// orchestrator will later write it: what that admission refuses — an image
// outside the migration operator's --allowed-agent-images, a field its
// webhook or CRD refuses — is refused now, with the plan, instead of
// stalling the plan's MigrationJob later. The orchestrator keeps no copy of
// the migration operator's rules or configuration.
//
// A dry run that cannot be made (the migration operator's webhook down, no
// MigrationJob CRD) does not refuse the plan: it is a warning, and the
// MigrationJob's own status says what is wrong when the plan creates it.
func (v *Validator) checkMigration(ctx context.Context, plan *platformv1.ProtectionPlan) (admission.Warnings, error) {
	if v.Client == nil || plan.Spec.Migration == nil {
		return nil, nil
	}
	spec := plan.Spec.DeepCopy()
	planspec.SetDefaults(spec)
	mj := planspec.MigrationJob(plan, spec)
	err := v.Client.Create(ctx, mj, client.DryRunAll)
	if apierrors.IsAlreadyExists(err) {
		cur := &migrationv1.MigrationJob{}
		if err = v.Client.Get(ctx, client.ObjectKeyFromObject(mj), cur); err == nil {
			if !metav1.IsControlledBy(cur, plan) {
				return nil, nil // not the plan's: the controller reports it (NotControlled)
			}
			cur.Spec = mj.Spec
			err = v.Client.Update(ctx, cur, client.DryRunAll)
		}
	}
	switch {
	case err == nil:
		return nil, nil
	case apierrors.IsInvalid(err), apierrors.IsForbidden(err), apierrors.IsBadRequest(err):
		return nil, apierrors.NewInvalid(platformv1.GroupVersion.WithKind("ProtectionPlan").GroupKind(), plan.Name, field.ErrorList{
			field.Invalid(field.NewPath("spec", "migration", "template"), "(MigrationJob "+mj.Name+")",
				"the MigrationJob this template makes is refused by the migration operator's admission: "+err.Error()),
		})
	default:
		return admission.Warnings{fmt.Sprintf("spec.migration.template: the migration operator's admission could not check the MigrationJob %s now (%v); "+
			"if it refuses it, the plan's status.migration says so when the plan creates it", mj.Name, err)}, nil
	}
}
