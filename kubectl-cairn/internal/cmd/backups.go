package cmd

import (
	"context"
	"fmt"
	"time"

	"github.com/spf13/cobra"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	backupv1 "cairn.dev/apis/backup/v1"
	platformv1 "cairn.dev/apis/platform/v1"
	restorev1 "cairn.dev/apis/restore/v1"
	"cairn.dev/kubectl-cairn/internal/view"
)

func newBackups(o *Options) *cobra.Command {
	var out string
	var cached bool
	var timeout time.Duration
	c := &cobra.Command{
		Use:   "backups BACKUPJOB|PLAN",
		Short: "The artifacts in the store's catalog of a BackupJob or ProtectionPlan",
		Long: `backups lists the artifacts in the store's catalog — name, time in the
object's time zone, size, checksum, encryption (the recipients'
fingerprints), the S3 Object Lock date and what retention decided (kept and
why, or pruned) as the BackupJob's last prune reported them, and whether a
verification restored it — newest first. The store is read by the backup operator, not by
this machine: the plugin sets the BackupJob's list-catalog annotation (a new
request id), the operator runs one short agent Job with the store's
credentials and records the catalog in status.catalog, and the plugin prints
it. That needs patch on the BackupJob (cairn-edit); --cached prints the last
listing with read rights only.`,
		Args:              cobra.ExactArgs(1),
		ValidArgsFunction: completeNames(o, kindBackupJob, kindPlan),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := checkOutput(out); err != nil {
				return err
			}
			return o.backups(cmd.Context(), args[0], out, cached, timeout)
		},
	}
	addOutputFlag(c, &out)
	c.Flags().BoolVar(&cached, "cached", false, "Print the last listing in status.catalog without asking for a new one")
	c.Flags().DurationVar(&timeout, "timeout", 5*time.Minute, "How long to wait for the listing")
	return c
}

// backupJobOf resolves a BackupJob or a plan (its BackupJob, named like it).
func (o *Options) backupJobOf(ctx context.Context, arg string) (*backupv1.BackupJob, *platformv1.ProtectionPlan, error) {
	k, obj, err := o.resolve(ctx, arg, kindBackupJob, kindPlan)
	if err != nil {
		return nil, nil, err
	}
	if k.name == kindBackupJob.name {
		return obj.(*backupv1.BackupJob), nil, nil
	}
	plan := obj.(*platformv1.ProtectionPlan)
	c, err := o.Client()
	if err != nil {
		return nil, nil, err
	}
	bj := &backupv1.BackupJob{}
	if err := c.Get(ctx, types.NamespacedName{Namespace: plan.Namespace, Name: plan.Name}, bj); err != nil {
		return nil, nil, fmt.Errorf("protectionplan/%s's BackupJob: %w", plan.Name, err)
	}
	return bj, plan, nil
}

// listCatalog asks for a new listing and waits for it (or, cached, reads the
// last one).
func (o *Options) listCatalog(ctx context.Context, bj *backupv1.BackupJob, cached bool, timeout time.Duration) (*backupv1.CatalogListing, error) {
	if !cached {
		id, err := o.request(ctx, bj, backupv1.ListCatalogAnnotation)
		if err != nil {
			return nil, err
		}
		err = o.follow(ctx, bj, timeout, func() (bool, string, error) {
			if cat := bj.Status.Catalog; cat != nil && cat.Request == id {
				return true, "", nil
			}
			return false, "", nil
		})
		if err != nil {
			return nil, fmt.Errorf("listing the store's catalog of backupjob/%s: %w", bj.Name, err)
		}
	}
	cat := bj.Status.Catalog
	switch {
	case cat == nil:
		return nil, fmt.Errorf("backupjob/%s has no catalog listing yet: run without --cached", bj.Name)
	case cat.Message != "":
		return nil, fmt.Errorf("listing the store's catalog of backupjob/%s failed: %s", bj.Name, cat.Message)
	}
	return cat, nil
}

func (o *Options) backups(ctx context.Context, arg, out string, cached bool, timeout time.Duration) error {
	bj, _, err := o.backupJobOf(ctx, arg)
	if err != nil {
		return err
	}
	cat, err := o.listCatalog(ctx, bj, cached, timeout)
	if err != nil {
		return err
	}
	verified, err := o.verifiedArtifacts(ctx, bj)
	if err != nil {
		return err
	}
	rows := view.Backups(cat, bj.Spec.TimeZone, verified, bj.Status.Retention)
	if out == OutputJSON || out == OutputYAML {
		return printData(o.Streams.Out, out, map[string]any{"backupJob": bj.Name, "count": cat.Count, "listedAt": cat.Time, "items": rows})
	}
	if err := view.BackupsTable(o.Streams.Out, rows, out == OutputWide); err != nil {
		return err
	}
	if int(cat.Count) > len(rows) {
		fmt.Fprintf(o.Streams.ErrOut, "(the newest %d of %d artifacts in the catalog)\n", len(rows), cat.Count)
	}
	return nil
}

// verifiedArtifacts maps artifact paths to the succeeded verification
// RestoreJob (of a plan) that restored them, from the RestoreJobs the user
// may read.
func (o *Options) verifiedArtifacts(ctx context.Context, bj *backupv1.BackupJob) (map[string]string, error) {
	c, err := o.Client()
	if err != nil {
		return nil, err
	}
	var rjs restorev1.RestoreJobList
	if err := c.List(ctx, &rjs, client.InNamespace(bj.Namespace), client.HasLabels{platformv1.PlanLabel}); err != nil {
		return nil, err
	}
	v := map[string]string{}
	for _, rj := range rjs.Items {
		src := rj.Spec.Source.BackupJob
		if rj.Status.Phase != restorev1.PhaseSucceeded || src == nil || src.Name != bj.Name || rj.Status.Artifact == nil {
			continue
		}
		v[rj.Status.Artifact.Path] = rj.Name
	}
	return v, nil
}
