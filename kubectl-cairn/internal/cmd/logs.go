package cmd

import (
	"context"
	"fmt"
	"io"
	"sort"

	"github.com/spf13/cobra"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/selection"
	"sigs.k8s.io/controller-runtime/pkg/client"

	backupv1 "cairn.dev/apis/backup/v1"
	platformv1 "cairn.dev/apis/platform/v1"
	"cairn.dev/libs/agentjob"
)

func newLogs(o *Options) *cobra.Command {
	var runs int
	var tail int64
	c := &cobra.Command{
		Use:   "logs OBJECT [--runs N] [--tail N]",
		Short: "The agent pods' logs of an object's runs (BackupJob, RestoreJob, MigrationJob, ProtectionPlan)",
		Long: `logs prints the agent container's logs of the newest runs of a BackupJob,
RestoreJob or MigrationJob (kind/name or a name), oldest first, each under
a header naming the pod; for a ProtectionPlan those of its BackupJob and its
verification RestoreJobs. It reads pods and pods/log with your rights, as
kubectl logs does (the built-in view role grants them).`,
		Args:              cobra.ExactArgs(1),
		ValidArgsFunction: completeNames(o, kinds...),
		RunE: func(cmd *cobra.Command, args []string) error {
			return o.logs(cmd.Context(), o.Streams.Out, args[0], runs, tail)
		},
	}
	c.Flags().IntVar(&runs, "runs", 3, "How many of the newest pods to show (0: all)")
	c.Flags().Int64Var(&tail, "tail", -1, "Lines of each pod's log, from the end (-1: all)")
	return c
}

func (o *Options) logs(ctx context.Context, w io.Writer, arg string, runs int, tail int64) error {
	k, obj, err := o.resolve(ctx, arg, kinds...)
	if err != nil {
		return err
	}
	c, err := o.Client()
	if err != nil {
		return err
	}
	var selectors []client.MatchingLabels
	if k.name == kindPlan.name {
		selectors = []client.MatchingLabels{
			{kindBackupJob.podLabel: obj.GetName()},
			{platformv1.PlanLabel: obj.GetName()},
		}
	} else {
		selectors = []client.MatchingLabels{{k.podLabel: obj.GetName()}}
	}
	// A BackupJob's catalog listings (kubectl cairn backups) and archive
	// checks are not runs.
	notListing, err := labels.NewRequirement(backupv1.RunKindLabel, selection.NotIn, []string{backupv1.RunKindList, backupv1.RunKindArchiveCheck})
	if err != nil {
		return err
	}
	var pods []corev1.Pod
	seen := map[string]bool{}
	for _, sel := range selectors {
		var l corev1.PodList
		sel := labels.SelectorFromSet(labels.Set(sel)).Add(*notListing)
		if err := c.List(ctx, &l, client.InNamespace(obj.GetNamespace()), client.MatchingLabelsSelector{Selector: sel}); err != nil {
			return err
		}
		for _, p := range l.Items {
			if !seen[p.Name] {
				seen[p.Name] = true
				pods = append(pods, p)
			}
		}
	}
	if len(pods) == 0 {
		return fmt.Errorf("%s/%s has no agent pods (left): its runs' pods are gone or none ran yet", k.name, obj.GetName())
	}
	sort.Slice(pods, func(a, b int) bool {
		return pods[a].CreationTimestamp.Before(&pods[b].CreationTimestamp) ||
			pods[a].CreationTimestamp.Equal(&pods[b].CreationTimestamp) && pods[a].Name < pods[b].Name
	})
	if runs > 0 && len(pods) > runs {
		pods = pods[len(pods)-runs:]
	}
	kube, err := o.Kube()
	if err != nil {
		return err
	}
	for _, p := range pods {
		fmt.Fprintf(w, "==> pod/%s (%s, %s) <==\n", p.Name, p.Status.Phase, p.CreationTimestamp.UTC().Format("2006-01-02T15:04:05Z"))
		opts := &corev1.PodLogOptions{Container: agentjob.ContainerName}
		if tail >= 0 {
			opts.TailLines = &tail
		}
		rc, err := kube.CoreV1().Pods(p.Namespace).GetLogs(p.Name, opts).Stream(ctx)
		if err != nil {
			fmt.Fprintf(w, "(no log: %s)\n", Explain(err))
			continue
		}
		_, err = io.Copy(w, rc)
		rc.Close()
		if err != nil {
			return err
		}
	}
	return nil
}
