package controller

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/events"

	"cairn.dev/agent/contract"
	cairnv1 "cairn.dev/apis/meta/v1"
	restorev1 "cairn.dev/apis/restore/v1"
	"cairn.dev/libs/agentjob"
	"cairn.dev/libs/conditions"
	"cairn.dev/libs/reconcile"
)

// summarize decides the RestoreJob's phase and conditions from what the
// steps found (libs/reconcile's one place for it): waiting for the source
// is Pending; a running Job Running; a finished one Succeeded or Failed,
// by the Job's outcome and the checks' results.
func (r *RestoreJobReconciler) summarize(p *pass, err error) error {
	rj, spec, obs := p.Obj, &p.Defaulted.Spec, p.State.run
	var waiting *reconcile.WaitingError
	if errors.As(err, &waiting) {
		rj.Status.Phase = restorev1.PhasePending
	}
	if err != nil || obs == nil {
		return err
	}
	artifact := ""
	if rj.Status.Artifact != nil {
		artifact = rj.Status.Artifact.Path
	}
	switch obs.State {
	case agentjob.RunPending:
		if rj.Status.Created() {
			rj.Status.Phase = restorev1.PhaseRunning
		}
	case agentjob.RunRunning:
		rj.Status.Phase = restorev1.PhaseRunning
		conditions.MarkReconciling(rj, restorev1.RestoreJobRunningReason, fmt.Sprintf(
			"restoring artifact %s into %s with Job %s (attempt %d of at most %d)",
			artifact, describeTarget(spec.Target), rj.JobName(), max(rj.Status.Attempts, 1), *spec.MaxRetries+1))
	case agentjob.RunDeleted:
		// A deleted restore is not started again behind the user's back.
		now := metav1.Now()
		rj.Status.Phase, rj.Status.CompletionTime = restorev1.PhaseFailed, &now
		conditions.MarkStalled(rj, restorev1.RestoreJobJobDeletedReason, fmt.Sprintf(
			"restore Job %s was deleted before it finished; the target database may be partly restored; create a new RestoreJob to try again", rj.JobName()))
	case agentjob.RunSucceeded:
		restored := fmt.Sprintf("restored artifact %s into %s in %s",
			artifact, describeTarget(spec.Target), rj.Status.CompletionTime.Sub(rj.Status.StartTime.Time).Round(time.Second))
		if reason, msg := checksOutcome(spec, rj.Status.Checks); reason != "" {
			rj.Status.Phase = restorev1.PhaseFailed
			conditions.MarkStalled(rj, reason, restored+", but "+msg+dropNote(spec, rj, obs.Result))
			return nil
		}
		rj.Status.Phase = restorev1.PhaseSucceeded
		if n := len(rj.Status.Checks); n > 0 {
			restored += fmt.Sprintf("; %d check(s) passed", n)
		}
		conditions.MarkReady(rj, cairnv1.SucceededReason, restored+dropNote(spec, rj, obs.Result))
	case agentjob.RunFailed:
		msg := fmt.Sprintf("restore Job %s failed after %d attempt(s)", rj.JobName(), rj.Status.Attempts)
		if o := obs.Outcome; o.Reason != "" {
			msg += ": " + o.Reason
		}
		if o := obs.Outcome; o.Message != "" {
			msg += " (" + o.Message + ")"
		}
		if f := obs.FailureReason(); f != "" {
			msg += "; agent: " + f
		}
		rj.Status.Phase = restorev1.PhaseFailed
		conditions.MarkStalled(rj, failedReason(obs.Failure), msg+"; create a new RestoreJob to try again")
	}
	return nil
}

// failedReason is the Stalled reason of a failed restore: the agent's
// failure code when the operator knows it (an encrypted artifact restored
// without a matching identity: the target was not touched, and the
// message names the recipients the artifact needs), else Failed. Decided
// on the code, never on the message's words.
func failedReason(f *contract.FailedError) string {
	if f != nil {
		switch f.Code {
		case contract.CodeEncryptionIdentityMissing:
			return restorev1.RestoreJobEncryptionIdentityMissingReason
		case contract.CodeEncryptionIdentityMismatch:
			return restorev1.RestoreJobEncryptionIdentityMismatchReason
		}
	}
	return cairnv1.FailedReason
}

// transition counts a RestoreJob that just reached Succeeded or Failed (the
// skeleton has emitted the transition Event), and warns when a target that
// should have been dropped after the checks was not.
func transition(_ context.Context, rec events.EventRecorder, old, rj *restorev1.RestoreJob) {
	if rj.Finished() && !old.Finished() {
		metrics.Finish(rj)
		if why, ok := notDropped(rj); ok {
			rec.Eventf(rj, nil, corev1.EventTypeWarning, restorev1.RestoreJobTargetNotDroppedReason, "Drop",
				"target database %s was not dropped after the checks%s", describeTarget(rj.Spec.Target), why)
		}
	}
}

// recordChecks copies the agent's check results and what it did to the
// target into status.
func recordChecks(rj *restorev1.RestoreJob, res *contract.Result) {
	rj.Status.Checks = nil
	for _, c := range res.Checks {
		rj.Status.Checks = append(rj.Status.Checks, restorev1.CheckResult{Name: c.Name, Passed: c.Passed, Value: c.Value, Message: c.Message})
	}
	rj.Status.TargetCreated = res.TargetCreated
	rj.Status.TargetDropped = res.TargetDropped
	rj.Status.Verified = res.Verified
}

// checksOutcome says whether every check of spec has a passing result: an
// empty reason when so (or when there are no checks), else the reason and a
// message naming the checks that failed or were not reported.
func checksOutcome(spec *restorev1.RestoreJobSpec, results []restorev1.CheckResult) (reason, msg string) {
	if len(spec.Checks) == 0 {
		return "", ""
	}
	got := map[string]restorev1.CheckResult{}
	for _, r := range results {
		got[r.Name] = r
	}
	var failed, missing []string
	for _, c := range spec.Checks {
		r, ok := got[c.Name]
		switch {
		case !ok:
			missing = append(missing, c.Name)
		case !r.Passed:
			f := c.Name
			if r.Message != "" {
				f += " (" + r.Message + ")"
			}
			failed = append(failed, f)
		}
	}
	switch {
	case len(failed) > 0:
		return restorev1.RestoreJobChecksFailedReason, fmt.Sprintf("%d of %d check(s) failed: %s",
			len(failed), len(spec.Checks), strings.Join(failed, "; "))
	case len(missing) > 0:
		return restorev1.RestoreJobChecksNotReportedReason, fmt.Sprintf(
			"the agent reported no result for check(s) %s (is the agent image older than the checks?)", strings.Join(missing, ", "))
	}
	return "", ""
}

// dropNote completes the Ready message with what happened to the target.
func dropNote(spec *restorev1.RestoreJobSpec, rj *restorev1.RestoreJob, res *contract.Result) string {
	switch {
	case !spec.DropTargetAfterChecks:
		return ""
	case rj.Status.TargetDropped:
		return "; the target database was dropped"
	case res != nil && res.DropError != "":
		return "; the target database was NOT dropped: " + res.DropError
	}
	return "; the target database was NOT dropped"
}

// notDropped reports a restore that ran (the Job succeeded) with
// spec.dropTargetAfterChecks but left its target, and why (from the
// Ready message dropNote completed).
func notDropped(rj *restorev1.RestoreJob) (string, bool) {
	if !rj.Spec.DropTargetAfterChecks || rj.Status.TargetDropped {
		return "", false
	}
	c := conditions.Get(rj, cairnv1.ReadyCondition)
	if c == nil {
		return "", false
	}
	_, why, ok := strings.Cut(c.Message, "NOT dropped")
	return why, ok
}
