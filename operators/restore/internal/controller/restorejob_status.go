package controller

import (
	"context"
	"fmt"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"cairn.dev/agent/result"
	cairnv1 "cairn.dev/apis/meta/v1"
	restorev1 "cairn.dev/apis/restore/v1"
	"cairn.dev/libs/agentjob"
	"cairn.dev/libs/conditions"
	"cairn.dev/libs/status"
	"cairn.dev/operators/restore/internal/restorespec"
)

// podResult reads the agent's report from the termination messages of the
// Job's pods.
func (p *pass) podResult(ctx context.Context, job *batchv1.Job) (*result.Result, string, error) {
	pods := &corev1.PodList{}
	if err := p.r.Client.List(ctx, pods, client.InNamespace(job.Namespace),
		client.MatchingLabels{restorev1.RestoreJobLabel: p.rj.Name}); err != nil {
		return nil, "", fmt.Errorf("listing the pods of Job %s: %w", job.Name, err)
	}
	var mine []corev1.Pod
	for _, pod := range pods.Items {
		if metav1.IsControlledBy(&pod, job) {
			mine = append(mine, pod)
		}
	}
	return agentjob.PodResult(mine)
}

// writeStatus writes status if it changed, and emits the transition Events.
func (p *pass) writeStatus(ctx context.Context) error {
	wrote, err := status.Write(ctx, p.r.Client, p.original, p.rj)
	if err != nil {
		return fmt.Errorf("writing status: %w", err)
	}
	if wrote {
		ctrl.LoggerFrom(ctx).V(1).Info("status written", "newPhase", p.rj.Status.Phase)
		p.emitTransition(p.original, p.rj)
		if p.rj.Finished() && !p.original.Finished() {
			recordFinished(p.rj)
		}
	}
	return nil
}

// emitTransition emits one Event when the phase or the Ready condition's
// reason changed from before to after: Warning when the RestoreJob is
// Stalled (failed, or a spec that cannot be acted on), Normal otherwise.
func (p *pass) emitTransition(before, after *restorev1.RestoreJob) {
	if p.r.Recorder == nil {
		return
	}
	ready := conditions.Get(after, cairnv1.ReadyCondition)
	if ready == nil {
		return
	}
	oldReason := ""
	if c := conditions.Get(before, cairnv1.ReadyCondition); c != nil {
		oldReason = c.Reason
	}
	if before.Status.Phase == after.Status.Phase && oldReason == ready.Reason {
		return
	}
	typ := corev1.EventTypeNormal
	if conditions.IsTrue(after, cairnv1.StalledCondition) {
		typ = corev1.EventTypeWarning
	}
	p.r.Recorder.Eventf(after, nil, typ, ready.Reason, eventAction(after.Status.Phase), "%s", ready.Message)
}

// eventAction is the Event's action for a phase.
func eventAction(ph restorev1.Phase) string {
	switch ph {
	case restorev1.PhaseRunning:
		return "RunRestore"
	case restorev1.PhaseSucceeded, restorev1.PhaseFailed:
		return "FinishRestore"
	}
	return "PrepareRestore"
}

// indexSourceBackupJob is the field index backupJobIndex: the
// "namespace/name" of the BackupJob a RestoreJob's source refers to.
func indexSourceBackupJob(obj client.Object) []string {
	rj, ok := obj.(*restorev1.RestoreJob)
	if !ok {
		return nil
	}
	if key, ok := restorespec.SourceBackupJob(rj); ok {
		return []string{key.String()}
	}
	return nil
}
