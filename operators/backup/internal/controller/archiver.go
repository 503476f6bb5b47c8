package controller

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	backupv1 "cairn.dev/apis/backup/v1"
	cairnv1 "cairn.dev/apis/meta/v1"
	"cairn.dev/libs/conditions"
	"cairn.dev/libs/ownership"
	"cairn.dev/libs/reconcile"
)

// +kubebuilder:rbac:groups=apps,resources=deployments,verbs=get;list;watch;create;update;patch;delete

// ensureArchiver is the step that keeps bj's archiver while
// spec.pointInTime is set, and removes it when it is not. It records the
// archiver for summarize, which decides PointInTimeReady
// (pointInTimeReady); a Deployment of that name controlled by someone else
// stalls the BackupJob and is named in the condition here.
func (r *BackupJobReconciler) ensureArchiver(ctx context.Context, p *pass) error {
	bj := p.Obj
	if bj.Spec.PointInTime == nil && needsSlotRelease(bj) {
		// Turned off: the PostgreSQL slot goes with the archiver
		// (status.pointInTime stays until it has).
		done, wait, err := r.releaseSlot(ctx, bj)
		if err != nil || !done {
			p.RequeueAfter(wait)
			return err
		}
		// Recorded before the release Job goes (releaseSlot).
		bj.Status.PointInTime = nil
		if err := p.Checkpoint(ctx); err != nil {
			return err
		}
	}
	if err := r.cleanReleaseJob(ctx, bj); err != nil {
		return err
	}
	if bj.Spec.PointInTime == nil {
		bj.Status.PointInTime = nil
		return r.removeArchiver(ctx, bj)
	}
	desired := desiredArchiver(bj, r.imageFor(bj))
	op, err := reconcile.EnsureChild(ctx, p, r.archivers, desired)
	if stalled := (*reconcile.StalledError)(nil); errors.As(err, &stalled) {
		conditions.Set(bj, backupv1.PointInTimeReadyCondition, metav1.ConditionFalse, cairnv1.NotControlledReason, err.Error())
	}
	if err != nil || op == "" {
		return err
	}
	if bj.Status.PointInTime == nil {
		bj.Status.PointInTime = &backupv1.PointInTimeStatus{}
	}
	bj.Status.PointInTime.Archiver = desired.Name
	dep := &appsv1.Deployment{}
	if op == ownership.Created {
		dep = desired
	} else if err := r.Client.Get(ctx, client.ObjectKeyFromObject(desired), dep); err != nil {
		return client.IgnoreNotFound(err)
	}
	p.State.archiver = dep
	return nil
}

// pointInTimeReady decides PointInTimeReady (summarize): absent without
// point-in-time; otherwise from the archiver the step saw and what the
// last backup and archive check read (archiveState). Left as the steps set
// it when the archiver step did not see one (NotControlled).
func pointInTimeReady(p *pass) {
	bj := p.Obj
	if bj.Spec.PointInTime == nil {
		conditions.Delete(bj, backupv1.PointInTimeReadyCondition)
		return
	}
	if p.State.archiver == nil || bj.Status.PointInTime == nil {
		return
	}
	reason, msg := archiveState(bj, p.State.archiver)
	status := metav1.ConditionFalse
	if reason == backupv1.ArchivingReason {
		status = metav1.ConditionTrue
	}
	conditions.Set(bj, backupv1.PointInTimeReadyCondition, status, reason, msg)
}

// archiveState is PointInTimeReady's reason and message: a gap in the
// archive first (restores across it are refused), then a slot the check
// dropped since the last backup (PostgreSQL: the archive breaks there),
// then the archiver's readiness (its probe: caught up within maxLag).
func archiveState(bj *backupv1.BackupJob, dep *appsv1.Deployment) (string, string) {
	st := bj.Status.PointInTime
	if len(st.Gaps) > 0 {
		return backupv1.ArchiveGapReason, fmt.Sprintf("the archive has %d gap(s): %s; a restore to a time across one is refused, and a new backup starts a continuous window after it",
			len(st.Gaps), strings.Join(st.Gaps, "; "))
	}
	chk := st.Check
	if chk != nil && chk.SlotDroppedTime != nil && (bj.Status.LastSuccessfulTime == nil || !chk.SlotDroppedTime.Before(bj.Status.LastSuccessfulTime)) {
		return backupv1.SlotDroppedReason, fmt.Sprintf("the archiver's replication slot %s retained more than spec.pointInTime.maxRetainedWAL (%d bytes) and was dropped at %s so the source's disk stays safe; the archive breaks there: a restore to a later time needs a backup taken after it",
			chk.Slot, bj.Spec.PointInTime.MaxRetainedWALBytes(), chk.SlotDroppedTime.UTC().Format(time.RFC3339))
	}
	ready := dep.Status.ObservedGeneration >= dep.Generation && dep.Status.ReadyReplicas > 0 && dep.Status.UpdatedReplicas > 0
	if !ready {
		msg := fmt.Sprintf("archiver %s has no ready replica: starting, failing, or behind by more than maxLag (%s)",
			dep.Name, pointInTime(bj).MaxLag)
		for _, c := range dep.Status.Conditions {
			if c.Type == appsv1.DeploymentAvailable && c.Message != "" {
				msg += "; " + c.Message
			}
		}
		if chk != nil && chk.Message != "" {
			msg += "; " + chk.Message
		}
		return backupv1.ArchiverNotReadyReason, msg
	}
	msg := fmt.Sprintf("archiver %s keeps up (changes archived within %s)", dep.Name, pointInTime(bj).MaxLag)
	if st.Latest != nil && st.Earliest != nil {
		msg += fmt.Sprintf("; recoverable from %s (as of the last backup's reading)", st.Earliest.UTC().Format(time.RFC3339))
	}
	return backupv1.ArchivingReason, msg
}

// removeArchiver deletes bj's archiver, if it has one.
func (r *BackupJobReconciler) removeArchiver(ctx context.Context, bj *backupv1.BackupJob) error {
	dep := &appsv1.Deployment{}
	err := r.Client.Get(ctx, client.ObjectKey{Namespace: bj.Namespace, Name: bj.ArchiverName()}, dep)
	if apierrors.IsNotFound(err) || (err == nil && !metav1.IsControlledBy(dep, bj)) {
		return nil
	}
	if err != nil {
		return err
	}
	if err := r.Client.Delete(ctx, dep, client.Preconditions{UID: &dep.UID}, client.PropagationPolicy(metav1.DeletePropagationBackground)); client.IgnoreNotFound(err) != nil {
		return fmt.Errorf("removing the archiver: %w", err)
	}
	ctrl.LoggerFrom(ctx).Info("archiver removed (spec.pointInTime unset)", "Deployment", dep.Name)
	return nil
}
