package controller

import (
	"context"
	"fmt"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/events"

	cairnv1 "cairn.dev/apis/meta/v1"
	platformv1 "cairn.dev/apis/platform/v1"
	"cairn.dev/libs/conditions"
)

// Event reasons of a plan besides the generic transition Event.
const (
	// VerificationStartedReason: a verification RestoreJob was decided.
	VerificationStartedReason = "VerificationStarted"
	// ObjectivesViolatedEventReason: ObjectivesMet turned False.
	ObjectivesViolatedEventReason = "ObjectivesViolated"
	// ObjectivesMetEventReason: ObjectivesMet turned True again.
	ObjectivesMetEventReason = "ObjectivesMet"
)

// checkAt asks the pass to requeue at t (the earliest request wins).
func (s *state) checkAt(t time.Time) {
	if s.nextCheck.IsZero() || t.Before(s.nextCheck) {
		s.nextCheck = t
	}
}

// summarize (reconcile.Reconciler.Summarize, after the steps) evaluates
// the objectives, summarises the three conditions into Ready
// (libs/conditions.Summary, Cluster API style: False before Unknown, a
// missing condition is Unknown, the first deciding condition's reason) and
// the phase, and requeues at the time the next objective would be violated
// — no polling. A pass a step ended keeps the status that step set, and a
// checkpoint stores the facts recorded so far: both are decided at the end
// of a pass whose steps all ran.
func (r *ProtectionPlanReconciler) summarize(p *pass, err error) error {
	if err != nil || p.AtCheckpoint() {
		return err
	}
	plan := p.Obj
	objectives(plan, &p.Defaulted.Spec, p.State.now, &p.State)
	setDecryption(plan, &p.Defaulted.Spec)
	ready := conditions.Summary(plan, cairnv1.ReadyCondition, platformv1.BackupHealthyCondition,
		platformv1.RecoverabilityVerifiedCondition, platformv1.ObjectivesMetCondition)
	switch ready.Status {
	case metav1.ConditionFalse:
		conditions.MarkNotReady(plan, ready.Reason, ready.Message)
		plan.Status.Phase = platformv1.PhaseAtRisk
	case metav1.ConditionUnknown:
		conditions.MarkReconciling(plan, ready.Reason, ready.Message)
		plan.Status.Phase = platformv1.PhasePending
	default:
		msg := "recoverable"
		if rp := plan.Status.RecoveryPoint; rp != nil {
			msg += " to " + rp.UTC().Format(time.RFC3339)
		}
		if d := plan.Status.RestoreDuration; d != nil {
			msg += fmt.Sprintf(", restore measured at %s", d.Duration)
		}
		conditions.MarkReady(plan, cairnv1.SucceededReason, msg)
		plan.Status.Phase = platformv1.PhaseProtected
	}
	if lv := plan.Status.LastVerification; lv != nil && !finished(lv.Result) && plan.Status.Phase != platformv1.PhaseAtRisk {
		plan.Status.Phase = platformv1.PhaseVerifying
	}
	if !p.State.nextCheck.IsZero() {
		// A second past the deadline, so the violation is strictly after it.
		p.RequeueAfter(p.State.nextCheck.Sub(p.State.now) + time.Second)
	}
	return nil
}

// objectives sets ObjectivesMet from the RPO, RTO and maximum verification
// age at now, and asks for a requeue when the next one would be violated.
func objectives(plan *platformv1.ProtectionPlan, spec *platformv1.ProtectionPlanSpec, now time.Time, s *state) {
	var violated, unknown []string
	o := spec.Objectives
	created := plan.CreationTimestamp.Time
	age := func(what string, ref *metav1.Time, limit time.Duration, name string) {
		switch {
		case ref != nil && now.Sub(ref.Time) > limit:
			violated = append(violated, fmt.Sprintf("%s: the newest %s is %s old, more than %s", name, what, round(now.Sub(ref.Time)), limit))
		case ref != nil:
			s.checkAt(ref.Add(limit))
		case now.Sub(created) > limit:
			violated = append(violated, fmt.Sprintf("%s: no %s in the %s since the plan was created, more than %s", name, what, round(now.Sub(created)), limit))
		default:
			unknown = append(unknown, fmt.Sprintf("%s: no %s yet", name, what))
			s.checkAt(created.Add(limit))
		}
	}
	switch a, why := judgeRPO(plan, spec, s.backupJob, now); {
	case plan.Status.RPO.Basis == platformv1.RPOBasisPointInTime:
		// The archive keeps up: its recovery point is at most maxLag old,
		// and the next change of PointInTimeReady is an event.
		if a > o.RPO.Duration {
			violated = append(violated, fmt.Sprintf("rpo: the recovery point (point-in-time archive) is %s old, more than %s", a, o.RPO.Duration))
		}
	default:
		var successful *metav1.Time
		if lb := plan.Status.LastBackup; lb != nil {
			successful = lb.SuccessfulTime
		}
		n := len(violated)
		age("successful backup", successful, o.RPO.Duration, "rpo")
		if why != "" && len(violated) > n {
			violated[n] += " (judged on the newest backup: the point-in-time archive does not count while " + why + ")"
		}
	}
	if o.RTO != nil {
		switch d := plan.Status.RestoreDuration; {
		case d == nil:
			unknown = append(unknown, "rto: no restore measured yet")
		case d.Duration > o.RTO.Duration:
			violated = append(violated, fmt.Sprintf("rto: the last verified restore took %s, more than %s", d.Duration, o.RTO.Duration))
		}
	}
	if o.MaxVerificationAge != nil {
		var verified *metav1.Time
		if sv := plan.Status.LastSuccessfulVerification; sv != nil {
			verified = sv.CompletionTime
		}
		age("successful verification", verified, o.MaxVerificationAge.Duration, "maxVerificationAge")
	}
	typ := platformv1.ObjectivesMetCondition
	switch {
	case len(violated) > 0:
		conditions.Set(plan, typ, metav1.ConditionFalse, platformv1.ObjectivesViolatedReason, strings.Join(violated, "; "))
	case len(unknown) > 0:
		conditions.Set(plan, typ, metav1.ConditionUnknown, platformv1.ObjectivesUnknownReason, strings.Join(unknown, "; "))
	default:
		conditions.Set(plan, typ, metav1.ConditionTrue, platformv1.ObjectivesMetReason, "rpo, rto and maxVerificationAge are met")
	}
}

func round(d time.Duration) time.Duration { return d.Round(time.Second) }

// deleting is the status of a plan whose children are being deleted.
func deleting(p *pass, err error) {
	plan := p.Obj
	plan.Status.Phase = platformv1.PhaseDeleting
	msg := "deleting the BackupJob and the verification RestoreJobs"
	if err != nil {
		msg += ": " + err.Error()
	}
	conditions.MarkReconciling(plan, cairnv1.DeletingReason, msg)
}

// transition emits the plan's own Events for a stored change (the skeleton
// has emitted the generic one for a phase or Ready change) and counts
// finished verifications.
func transition(_ context.Context, rec events.EventRecorder, old, plan *platformv1.ProtectionPlan) {
	if lv := plan.Status.LastVerification; lv != nil {
		olv := old.Status.LastVerification
		if olv == nil || olv.RestoreJob != lv.RestoreJob {
			rec.Eventf(plan, nil, corev1.EventTypeNormal, VerificationStartedReason, "Verify",
				"RestoreJob %s verifies backup %s: %s", lv.RestoreJob, lv.Artifact.Path, lv.Message)
		}
		if finished(lv.Result) && (olv == nil || olv.RestoreJob != lv.RestoreJob || !finished(olv.Result)) {
			typ, reason := corev1.EventTypeNormal, platformv1.VerificationSucceededReason
			if lv.Result == platformv1.VerificationFailed {
				typ, reason = corev1.EventTypeWarning, platformv1.VerificationFailedReason
			}
			rec.Eventf(plan, nil, typ, reason, "Verify", "RestoreJob %s, backup %s: %s", lv.RestoreJob, lv.Artifact.Path, lv.Message)
			metrics.Verified(plan, lv)
		}
	}
	oc, nc := conditions.Get(old, platformv1.ObjectivesMetCondition), conditions.Get(plan, platformv1.ObjectivesMetCondition)
	if nc != nil && (oc == nil || oc.Status != nc.Status) {
		switch nc.Status {
		case metav1.ConditionFalse:
			rec.Eventf(plan, nil, corev1.EventTypeWarning, ObjectivesViolatedEventReason, "Evaluate", "%s", nc.Message)
		case metav1.ConditionTrue:
			if oc != nil && oc.Status == metav1.ConditionFalse {
				rec.Eventf(plan, nil, corev1.EventTypeNormal, ObjectivesMetEventReason, "Evaluate", "%s", nc.Message)
			}
		}
	}
}
