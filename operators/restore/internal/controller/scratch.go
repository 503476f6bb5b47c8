package controller

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	"cairn.dev/agent/contract"
	restorev1 "cairn.dev/apis/restore/v1"
	"cairn.dev/libs/agentjob"
	"cairn.dev/libs/finalizer"
	"cairn.dev/libs/hold"
)

// A verification restore (spec.dropTargetAfterChecks) creates a scratch
// database. When it is stopped before it finished — its RestoreJob
// deleted, or the whole namespace (issue 30) — the agent drops the
// database it created before it exits and says so in its termination
// message (failure code contract.CodeScratchDropped / CodeScratchNotDropped). The pod
// carries ScratchReportFinalizer from its Job's template, so that message
// is still there when the operator reads it, however fast the pod is
// deleted. The scratch-pod controller reads it once the agent ended: for a
// pod being deleted, of a RestoreJob being deleted or gone, or in a
// namespace being deleted (whose RestoreJobs' status goes with it; and a
// namespace's deletion removes its pods before anything else), it reports
// it — an Event on the RestoreJob and on the Namespace when that is being
// deleted — and releases the pod; a pod whose RestoreJob finished
// otherwise is released at once (its status holds the outcome). A deleted
// RestoreJob's cleanup waits until none of its pods is held. The operator
// may remove that finalizer and change nothing else of a pod: the
// ValidatingAdmissionPolicy cairn-restore-pod-writes (docs/security.md).
const ScratchReportFinalizer = "restore.cairn.dev/scratch-report"

// Event reasons of a stopped verification restore.
const (
	// ScratchDroppedReason (Normal): the stopped restore dropped the scratch
	// database it created.
	ScratchDroppedReason = "ScratchDatabaseDropped"
	// ScratchLeftReason (Warning): it did not, or said nothing: the
	// scratch database may remain.
	ScratchLeftReason = "ScratchDatabaseLeft"
)

// podFinalizers are the finalizers of a restore's pods: ScratchReportFinalizer
// for a verification restore.
func podFinalizers(spec *restorev1.RestoreJobSpec) []string {
	if spec.DropTargetAfterChecks {
		return []string{ScratchReportFinalizer}
	}
	return nil
}

// heldPods are the pods of rj's Job that carry ScratchReportFinalizer,
// read live.
func (r *RestoreJobReconciler) heldPods(ctx context.Context, rj *restorev1.RestoreJob) ([]corev1.Pod, error) {
	list := &corev1.PodList{}
	if err := r.APIReader.List(ctx, list, client.InNamespace(rj.Namespace),
		client.MatchingLabels{ManagedByLabel: ManagedByValue, restorev1.RestoreJobLabel: rj.Name}); err != nil {
		return nil, err
	}
	var out []corev1.Pod
	for _, p := range list.Items {
		if controllerutil.ContainsFinalizer(&p, ScratchReportFinalizer) {
			out = append(out, p)
		}
	}
	return out, nil
}

// agentState is the agent container's state: whether it ran and ended,
// and its termination message.
func agentState(p *corev1.Pod) (started, ended bool, message string) {
	over := p.Status.Phase == corev1.PodSucceeded || p.Status.Phase == corev1.PodFailed
	for _, cs := range p.Status.ContainerStatuses {
		if cs.Name != agentjob.ContainerName {
			continue
		}
		if t := cs.State.Terminated; t != nil {
			return true, true, t.Message
		}
		return cs.State.Running != nil || cs.LastTerminationState.Terminated != nil, over, ""
	}
	return false, over, ""
}

// scratchPodsGone is the part of a deleted RestoreJob's cleanup that waits
// until the scratch-pod controller reported and released its pods. True
// when none is held.
func (r *RestoreJobReconciler) scratchPodsGone(ctx context.Context, rj *restorev1.RestoreJob) (bool, error) {
	pods, err := r.heldPods(ctx, rj)
	if err != nil {
		return false, err
	}
	for i := range pods {
		ctrl.LoggerFrom(ctx).Info("waiting for the verification's pod to be reported", "Pod", pods[i].Name)
	}
	return len(pods) == 0, nil
}

// reportAndRelease reports what the agent of pod p (of rj, nil when gone)
// said about its scratch database, if it ran, and releases p.
func (r *RestoreJobReconciler) reportAndRelease(ctx context.Context, rj *restorev1.RestoreJob, p *corev1.Pod) error {
	if started, _, msg := agentState(p); started {
		r.scratchEvent(ctx, rj, p, msg)
	}
	if err := releasePod(ctx, r.Client, p); err != nil {
		return err
	}
	ctrl.LoggerFrom(ctx).Info("released the verification's pod after its report", "Pod", p.Name)
	return nil
}

// scratchEvent reports what the stopped agent of pod said about the
// scratch database of rj (nil: gone; then on the Namespace only, if it is
// being deleted).
func (r *RestoreJobReconciler) scratchEvent(ctx context.Context, rj *restorev1.RestoreJob, pod *corev1.Pod, msg string) {
	var where, about string
	if rj != nil {
		t := rj.Spec.Target
		where = fmt.Sprintf("%q on %s:%d", t.Database, t.Host, t.Port)
	} else {
		where = "(its RestoreJob is gone)"
	}
	typ, reason, note := corev1.EventTypeWarning, ScratchLeftReason, ""
	res, err := contract.Parse(msg)
	var failed *contract.FailedError
	switch {
	case err == nil && res != nil:
		if res.TargetDropped || !res.TargetCreated {
			return // it finished: its result says what it did
		}
		note = fmt.Sprintf("the restore (pod %s) finished but did not drop the scratch database %s: %s", pod.Name, where, res.DropError)
	case asFailed(err, &failed) && failed.Code == contract.CodeScratchDropped:
		typ, reason = corev1.EventTypeNormal, ScratchDroppedReason
		note = fmt.Sprintf("the restore (pod %s) was stopped or failed before it finished and dropped the scratch database %s it had created", pod.Name, where)
	case asFailed(err, &failed) && failed.Code == contract.CodeScratchNotDropped:
		note = fmt.Sprintf("the restore (pod %s) was stopped or failed before it finished and could NOT drop the scratch database %s it had created: %s", pod.Name, where, failed.Reason)
	case asFailed(err, &failed):
		return // it failed before it created the scratch database
	default:
		note = fmt.Sprintf("the restore (pod %s) was stopped without a report: if it had created the scratch database %s, it remains (on PostgreSQL it carries the comment %q)",
			pod.Name, where, "cairn-agent: scratch database of a verification restore of …")
	}
	ctrl.LoggerFrom(ctx).Info("verification's scratch database", "Pod", pod.Name, "reason", reason, "note", note)
	var ns client.Object
	if rj != nil {
		r.Recorder.Eventf(rj, nil, typ, reason, "Cleanup", "%s", note)
		ns, about = finalizer.NamespaceOf(r.APIReader, rj, "RestoreJob")(ctx)
	} else {
		ns, about = finalizer.NamespaceOf(r.APIReader, pod, "Pod")(ctx)
	}
	if ns != nil {
		r.Recorder.Eventf(ns, nil, typ, reason, "Cleanup", "%s: %s", about, note)
	}
}

func asFailed(err error, target **contract.FailedError) bool {
	f, ok := err.(*contract.FailedError)
	if ok {
		*target = f
	}
	return ok
}

// releasePod removes ScratchReportFinalizer from p (a merge patch of its
// finalizers with the optimistic lock).
func releasePod(ctx context.Context, c client.Client, p *corev1.Pod) error {
	orig := p.DeepCopy()
	if !controllerutil.RemoveFinalizer(p, ScratchReportFinalizer) {
		return nil
	}
	err := c.Patch(ctx, p, client.MergeFromWithOptions(orig, client.MergeFromWithOptimisticLock{}))
	return client.IgnoreNotFound(err)
}

// releaseScratchPods releases every held pod of rj (cleanup given up).
func (r *RestoreJobReconciler) releaseScratchPods(ctx context.Context, rj *restorev1.RestoreJob) error {
	pods, err := r.heldPods(ctx, rj)
	if err != nil {
		return err
	}
	for i := range pods {
		if err := releasePod(ctx, r.Client, &pods[i]); err != nil {
			return err
		}
	}
	return nil
}

// scratchPods reports and releases held pods (see ScratchReportFinalizer).
type scratchPods struct {
	r *RestoreJobReconciler
}

func (s *scratchPods) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	r := s.r
	p := &corev1.Pod{}
	if err := r.APIReader.Get(ctx, req.NamespacedName, p); err != nil || !controllerutil.ContainsFinalizer(p, ScratchReportFinalizer) {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	if started, ended, _ := agentState(p); started && !ended {
		return ctrl.Result{}, nil // the agent runs (or is being stopped): its report comes when it ends
	}
	rj := &restorev1.RestoreJob{}
	err := r.Client.Get(ctx, types.NamespacedName{Namespace: p.Namespace, Name: p.Labels[restorev1.RestoreJobLabel]}, rj)
	switch {
	case apierrors.IsNotFound(err):
		return ctrl.Result{}, r.reportAndRelease(ctx, nil, p)
	case err != nil:
		return ctrl.Result{}, err
	case !p.DeletionTimestamp.IsZero() || !rj.DeletionTimestamp.IsZero():
		return ctrl.Result{}, r.reportAndRelease(ctx, rj, p)
	}
	if ns, _ := finalizer.NamespaceOf(r.APIReader, rj, "RestoreJob")(ctx); ns != nil {
		return ctrl.Result{}, r.reportAndRelease(ctx, rj, p)
	}
	if rj.Finished() {
		return ctrl.Result{}, releasePod(ctx, r.Client, p)
	}
	return ctrl.Result{}, nil // the RestoreJob records the outcome; then the pod is released
}

// scratchPodHold is what the scratch-pod controller holds: the pods of
// verification RestoreJobs (their changes are mapped to their held pods).
func scratchPodHold() *hold.Children {
	return &hold.Children{Finalizer: ScratchReportFinalizer, Label: restorev1.RestoreJobLabel,
		Object: &corev1.Pod{}, List: &corev1.PodList{}, Owner: &restorev1.RestoreJob{},
		Has: func(o client.Object) bool {
			rj, ok := o.(*restorev1.RestoreJob)
			return ok && rj.Spec.DropTargetAfterChecks
		}}
}
