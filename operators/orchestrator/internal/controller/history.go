package controller

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	platformv1 "cairn.dev/apis/platform/v1"
	restorev1 "cairn.dev/apis/restore/v1"
)

// pruneHistory deletes the oldest finished verification RestoreJobs beyond
// the history limits.
func (r *ProtectionPlanReconciler) pruneHistory(ctx context.Context, p *pass) error {
	plan, v := p.Obj, &p.Defaulted.Spec.Verification
	list := &restorev1.RestoreJobList{}
	if err := r.Client.List(ctx, list, client.InNamespace(plan.Namespace),
		client.MatchingLabels{platformv1.PlanLabel: plan.Name}); err != nil {
		return fmt.Errorf("listing verification RestoreJobs: %w", err)
	}
	var succeeded, failed []*restorev1.RestoreJob
	for i := range list.Items {
		rj := &list.Items[i]
		if !metav1.IsControlledBy(rj, plan) || !rj.DeletionTimestamp.IsZero() {
			continue
		}
		switch rj.Status.Phase {
		case restorev1.PhaseSucceeded:
			succeeded = append(succeeded, rj)
		case restorev1.PhaseFailed:
			failed = append(failed, rj)
		}
	}
	for _, set := range []struct {
		jobs  []*restorev1.RestoreJob
		limit int32
	}{{succeeded, *v.SuccessfulHistoryLimit}, {failed, *v.FailedHistoryLimit}} {
		// Newest first, by the sequence number in the name.
		slices.SortFunc(set.jobs, func(a, b *restorev1.RestoreJob) int { return sequence(b.Name) - sequence(a.Name) })
		for i, rj := range set.jobs {
			if int32(i) < set.limit {
				continue
			}
			if err := r.deleteChild(ctx, rj); err != nil {
				return err
			}
			ctrl.LoggerFrom(ctx).Info("deleted old verification RestoreJob", "RestoreJob", rj.Name, "phase", rj.Status.Phase)
		}
	}
	return nil
}

// sequence is n of a RestoreJob named <plan>-verify-<n>.
func sequence(name string) int {
	i := strings.LastIndex(name, "-")
	n, _ := strconv.Atoi(name[i+1:])
	return n
}
