package planspec

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	migrationv1 "cairn.dev/apis/migration/v1"
	platformv1 "cairn.dev/apis/platform/v1"
)

// MigrationJobName is the name of plan's one MigrationJob.
func MigrationJobName(plan *platformv1.ProtectionPlan) string {
	return plan.Name + platformv1.MigrationJobSuffix
}

// MigrationJob is the MigrationJob plan's spec.migration makes: its template
// with the MigrationJob defaults applied (a defaulted child is no drift).
// Its source is the plan's database: admission and prepare refuse any
// other. The controller creates it; the validating webhook has the
// migration operator's admission judge it first (a dry run).
func MigrationJob(plan *platformv1.ProtectionPlan, spec *platformv1.ProtectionPlanSpec) *migrationv1.MigrationJob {
	t := spec.Migration.Template.DeepCopy()
	t.SetDefaults()
	return &migrationv1.MigrationJob{
		ObjectMeta: metav1.ObjectMeta{
			Namespace: plan.Namespace, Name: MigrationJobName(plan),
			Labels: map[string]string{platformv1.PlanLabel: plan.Name},
		},
		Spec: *t,
	}
}
