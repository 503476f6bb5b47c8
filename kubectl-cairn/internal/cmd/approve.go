package cmd

import (
	"context"
	"fmt"
	"time"

	"github.com/spf13/cobra"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	migrationv1 "cairn.dev/apis/migration/v1"
	platformv1 "cairn.dev/apis/platform/v1"
)

func newApprove(o *Options) *cobra.Command {
	var w bool
	var timeout time.Duration
	c := &cobra.Command{
		Use:   "approve MIGRATIONJOB [--wait]",
		Short: "Approve a MigrationJob's Manual cutover",
		Long: `approve sets spec.cutover.approved on the MigrationJob. The MigrationJob of a
ProtectionPlan (<plan>-migrate) is kept at the plan's template, so there the
approval goes into the plan's spec.migration.template. With --wait it follows
the cutover to Succeeded or Failed and prints what cutover did.`,
		Args:              cobra.ExactArgs(1),
		ValidArgsFunction: completeNames(o, kindMigrationJob),
		RunE: func(cmd *cobra.Command, args []string) error {
			return o.approve(cmd.Context(), args[0], w, timeout)
		},
	}
	addWaitFlags(c, &w, &timeout, time.Hour, "the cutover")
	return c
}

const (
	approvePatch     = `{"spec":{"cutover":{"approved":true}}}`
	planApprovePatch = `{"spec":{"migration":{"template":{"cutover":{"approved":true}}}}}`
)

func (o *Options) approve(ctx context.Context, name string, w bool, timeout time.Duration) error {
	mj := &migrationv1.MigrationJob{}
	c, err := o.get(ctx, name, mj)
	if err != nil {
		return err
	}
	switch {
	case mj.Spec.Cutover.Mode != migrationv1.CutoverManual:
		return fmt.Errorf("migrationjob/%s cuts over by itself (cutover.mode %s): nothing to approve", name, mj.Spec.Cutover.Mode)
	case mj.Status.Phase == migrationv1.PhaseSucceeded || mj.Status.Phase == migrationv1.PhaseFailed:
		return fmt.Errorf("migrationjob/%s has finished (%s): nothing to approve", name, mj.Status.Phase)
	}
	if plan := mj.Labels[platformv1.PlanLabel]; plan != "" {
		p := &platformv1.ProtectionPlan{}
		if err := c.Get(ctx, types.NamespacedName{Namespace: mj.Namespace, Name: plan}, p); err != nil {
			return fmt.Errorf("migrationjob/%s belongs to protectionplan/%s: %w", name, plan, err)
		}
		if err := c.Patch(ctx, p, client.RawPatch(types.MergePatchType, []byte(planApprovePatch))); err != nil {
			return err
		}
		fmt.Fprintf(o.Streams.Out, "migrationjob/%s: cutover approved (in protectionplan/%s's spec.migration.template)\n", name, plan)
	} else {
		if err := c.Patch(ctx, mj, client.RawPatch(types.MergePatchType, []byte(approvePatch))); err != nil {
			return err
		}
		fmt.Fprintf(o.Streams.Out, "migrationjob/%s: cutover approved\n", name)
	}
	if mj.Status.Phase != migrationv1.PhaseReadyForCutover {
		fmt.Fprintf(o.Streams.ErrOut, "note: migrationjob/%s is %s: the cutover starts once it is ReadyForCutover\n", name, mj.Status.Phase)
	}
	if !w {
		return nil
	}
	err = o.follow(ctx, mj, timeout, func() (bool, string, error) {
		p := mj.Status.Phase
		return p == migrationv1.PhaseSucceeded || p == migrationv1.PhaseFailed, "phase " + string(p), nil
	})
	if err != nil {
		return err
	}
	if cs := mj.Status.Cutover; cs != nil {
		for _, a := range cs.Actions {
			fmt.Fprintf(o.Streams.Out, "  %s\n", a)
		}
	}
	if mj.Status.Phase == migrationv1.PhaseFailed {
		fmt.Fprintf(o.Streams.Out, "migrationjob/%s: Failed: %s\n", name, stalledMessage(mj.Status.Conditions))
		return &exitError{code: 2, msg: "the migration failed"}
	}
	fmt.Fprintf(o.Streams.Out, "migrationjob/%s: Succeeded\n", name)
	return nil
}
