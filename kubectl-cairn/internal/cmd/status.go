package cmd

import (
	"context"

	"github.com/spf13/cobra"
	"sigs.k8s.io/controller-runtime/pkg/client"

	backupv1 "cairn.dev/apis/backup/v1"
	migrationv1 "cairn.dev/apis/migration/v1"
	platformv1 "cairn.dev/apis/platform/v1"
	"cairn.dev/kubectl-cairn/internal/view"
)

func newStatus(o *Options) *cobra.Command {
	var all bool
	var out string
	c := &cobra.Command{
		Use:   "status [-A]",
		Short: "Every protected database at a glance, what needs attention first",
		Long: `status lists the BackupJobs, ProtectionPlans and MigrationJobs of the namespace
(-A: of every namespace you may read) with their phase, last success and its
age, next run, recovery point, whether the RPO and RTO objectives are met, and
what needs attention — failed or stalled first, then what waits for you.
A BackupJob a ProtectionPlan owns is shown in the plan's row.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := checkOutput(out); err != nil {
				return err
			}
			objs, err := o.statusObjects(cmd.Context(), all)
			if err != nil {
				return err
			}
			now := o.Now()
			rows := view.Status(objs, now)
			if out == OutputJSON || out == OutputYAML {
				return printData(o.Streams.Out, out, map[string]any{"items": rows})
			}
			if len(rows) == 0 {
				ns, _ := o.Namespace()
				if all {
					ns = "any namespace"
				}
				_, err := o.Streams.ErrOut.Write([]byte("No BackupJobs, ProtectionPlans or MigrationJobs in " + ns + ".\n"))
				return err
			}
			return view.Table(o.Streams.Out, rows, now, all, out == OutputWide)
		},
	}
	c.Flags().BoolVarP(&all, "all-namespaces", "A", false, "Every namespace you may read")
	addOutputFlag(c, &out)
	return c
}

func (o *Options) statusObjects(ctx context.Context, all bool) (view.Objects, error) {
	c, err := o.Client()
	if err != nil {
		return view.Objects{}, err
	}
	var opts []client.ListOption
	if !all {
		ns, err := o.Namespace()
		if err != nil {
			return view.Objects{}, err
		}
		opts = append(opts, client.InNamespace(ns))
	}
	var bjs backupv1.BackupJobList
	var plans platformv1.ProtectionPlanList
	var mjs migrationv1.MigrationJobList
	for _, l := range []client.ObjectList{&bjs, &plans, &mjs} {
		if err := c.List(ctx, l, opts...); err != nil {
			return view.Objects{}, err
		}
	}
	return view.Objects{BackupJobs: bjs.Items, Plans: plans.Items, MigrationJobs: mjs.Items}, nil
}
