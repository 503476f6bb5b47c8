package controller

import (
	"context"
	"fmt"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	migrationv1 "cairn.dev/apis/migration/v1"
	platformv1 "cairn.dev/apis/platform/v1"
	"cairn.dev/libs/reconcile"
	"cairn.dev/operators/orchestrator/internal/planspec"
)

// migration creates the plan's MigrationJob once spec.migration.start is
// true and keeps it at the template; a MigrationJob already created is
// never deleted here (start set back to false only stops keeping it at the
// template). Its phase and conditions are mirrored into status.migration;
// they do not count towards the plan's Ready.
func (r *ProtectionPlanReconciler) migration(ctx context.Context, p *pass) error {
	plan := p.Obj
	name := planspec.MigrationJobName(plan)
	if m := p.Defaulted.Spec.Migration; m != nil && m.Start {
		desired := planspec.MigrationJob(plan, &p.Defaulted.Spec)
		if _, err := reconcile.EnsureChild(ctx, p, r.applier, desired); err != nil {
			return err
		}
	}
	mj := &migrationv1.MigrationJob{}
	err := r.Client.Get(ctx, client.ObjectKey{Namespace: plan.Namespace, Name: name}, mj)
	switch {
	case apierrors.IsNotFound(err):
		if m := p.Defaulted.Spec.Migration; m != nil && m.Start {
			p.RequeueAfter(time.Second) // just created: the cache catches up
		}
		if plan.Status.Migration != nil {
			plan.Status.Migration.Phase = ""
			plan.Status.Migration.Conditions = nil
		}
		return nil
	case err != nil:
		return fmt.Errorf("reading MigrationJob %s: %w", name, err)
	}
	if !metav1.IsControlledBy(mj, plan) {
		// Not the plan's: never mirrored (with start true, Ensure stalled above).
		return nil
	}
	plan.Status.Migration = &platformv1.MigrationRecord{
		Name:       name,
		Phase:      mj.Status.Phase,
		Conditions: append([]metav1.Condition(nil), mj.Status.Conditions...),
	}
	return nil
}
