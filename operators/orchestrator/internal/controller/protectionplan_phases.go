package controller

import (
	"context"
	"fmt"
	"strings"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	backupv1 "cairn.dev/apis/backup/v1"
	cairnv1 "cairn.dev/apis/meta/v1"
	platformv1 "cairn.dev/apis/platform/v1"
	restorev1 "cairn.dev/apis/restore/v1"
	"cairn.dev/libs/access"
	"cairn.dev/libs/conditions"
	"cairn.dev/libs/ownership"
	"cairn.dev/libs/reconcile"
	"cairn.dev/libs/schedule"
	"cairn.dev/operators/orchestrator/internal/planspec"
)

// begin reads the clock once and gives a new plan its first phase
// (reconcile.Reconciler.Begin).
func (r *ProtectionPlanReconciler) begin(p *pass) {
	p.State.now = r.Clock.Now()
	if p.Obj.Status.Phase == "" {
		p.Obj.Status.Phase = platformv1.PhasePending
	}
}

// check validates the defaulted spec: an invalid spec or a scratch
// database that is the protected one stalls the plan, Pending, before any
// child is touched.
func (r *ProtectionPlanReconciler) check(_ context.Context, p *pass) error {
	plan := p.Obj
	if ferr := planspec.ScratchError(&p.Defaulted.Spec, plan.Namespace, field.NewPath("spec", "verification", "restoreInto")); ferr != nil {
		plan.Status.Phase = platformv1.PhasePending
		return reconcile.Stalled(platformv1.ScratchIsProtectedReason, "%s", ferr.Error())
	}
	if err := reconcile.Valid(planspec.Validate(plan.Name, plan.Namespace, &p.Defaulted.Spec), ""); err != nil {
		plan.Status.Phase = platformv1.PhasePending
		return err
	}
	// Only references the admission webhook approved (libs/access): no
	// child is created or changed otherwise (the children's webhooks trust
	// the orchestrator's requests, so this is where the plan's requester
	// is held to what they may use).
	if err := reconcile.Approved(&r.Base, access.ProtectionPlan, plan); err != nil {
		plan.Status.Phase = platformv1.PhasePending
		return err
	}
	return nil
}

// ensureBackup creates the plan's BackupJob, or reverts it to the plan's
// template, and records what it reports.
func (r *ProtectionPlanReconciler) ensureBackup(ctx context.Context, p *pass) error {
	plan := p.Obj
	desired := desiredBackupJob(plan, &p.Defaulted.Spec)
	op, err := reconcile.EnsureChild(ctx, p, r.backupJobs, desired)
	if err != nil {
		return err
	}
	bj := &backupv1.BackupJob{}
	if op == ownership.Created {
		// Go on with what was created: its create event is dropped
		// (backupJobAsCreated) and the cache may not have it yet.
		bj, err = desired, nil
	} else {
		err = r.Client.Get(ctx, client.ObjectKeyFromObject(desired), bj)
	}
	switch {
	case apierrors.IsNotFound(err):
		bj = nil
		p.RequeueAfter(time.Second) // just created: the cache catches up
	case err != nil:
		return fmt.Errorf("reading BackupJob %s: %w", desired.Name, err)
	}
	p.State.backupJob = bj
	observeBackup(plan, bj)
	return nil
}

// backupJobAsCreated reports whether a BackupJob's create event is this
// operator's own create coming back: unchanged since (ownership.AsCreated)
// and not yet seen by the backup operator (no status: observedGeneration
// is the CRD's default, -1, and there are no conditions). A create event
// of a BackupJob that already has a status (a relist after a gap) passes.
func backupJobAsCreated(o client.Object) bool {
	bj, ok := o.(*backupv1.BackupJob)
	return ok && ownership.AsCreated(bj) && bj.Status.ObservedGeneration <= 0 && len(bj.Status.Conditions) == 0
}

// observeBackup records the BackupJob's runs in status.lastBackup, counts
// new successful backups, and mirrors its Ready condition into
// BackupHealthy.
func observeBackup(plan *platformv1.ProtectionPlan, bj *backupv1.BackupJob) {
	rec := plan.Status.LastBackup
	if rec == nil {
		rec = &platformv1.BackupRecord{}
	}
	rec.BackupJob = plan.Name
	plan.Status.LastBackup = rec
	if bj == nil {
		conditions.Set(plan, platformv1.BackupHealthyCondition, metav1.ConditionUnknown,
			platformv1.BackupJobMissingReason, fmt.Sprintf("BackupJob %s is being created", plan.Name))
		return
	}
	rec.Time = bj.Status.LastBackupTime.DeepCopy()
	rec.Result = bj.Status.LastResult
	if s := bj.Status.LastSuccessfulTime; s != nil && bj.Status.LastArtifact != nil &&
		(rec.SuccessfulTime == nil || s.After(rec.SuccessfulTime.Time)) {
		// A new successful backup: its time and artifact are read together.
		rec.SuccessfulTime = s.DeepCopy()
		a := *bj.Status.LastArtifact
		rec.Artifact = &a
		plan.Status.BackupsSinceVerification++
	}
	// Cluster API's mirror: a child that has not reported Ready for its
	// current generation is Unknown, never taken as Ready.
	conditions.SetMirror(plan, bj, cairnv1.ReadyCondition, platformv1.BackupHealthyCondition)
}

// verification follows the running verification, starts a new one when it
// is due, and sets RecoverabilityVerified.
func (r *ProtectionPlanReconciler) verification(ctx context.Context, p *pass) error {
	plan := p.Obj
	if lv := plan.Status.LastVerification; lv != nil && !finished(lv.Result) {
		if err := r.follow(ctx, p, lv); err != nil {
			return err
		}
	}
	if due, why := r.due(p); due {
		var target *metav1.Time
		if pointInTimeOn(&p.Defaulted.Spec) {
			t, notBefore, ok := drillTarget(&p.Defaulted.Spec, plan.Status.LastBackup, p.State.now)
			if !ok {
				// The newest backup just finished: restore to a second
				// after it, once the archive vouches for that second.
				p.State.checkAt(notBefore)
				setRecoverability(plan, &p.Defaulted.Spec, p.State.backupJob)
				return nil
			}
			target = &metav1.Time{Time: t}
		}
		if err := r.start(ctx, p, why, target); err != nil {
			return err
		}
	}
	setRecoverability(plan, &p.Defaulted.Spec, p.State.backupJob)
	return nil
}

// verifyNowRequest is the verify-now annotation's value when it asks for a
// verification not started yet, else "".
func verifyNowRequest(plan *platformv1.ProtectionPlan) string {
	if id := plan.Annotations[platformv1.VerifyNowAnnotation]; id != plan.Status.LastVerifyNowRequest {
		return id
	}
	return ""
}

func finished(r platformv1.VerificationResult) bool {
	return r == platformv1.VerificationSucceeded || r == platformv1.VerificationFailed
}

// due says whether a new verification should start now, and why.
func (r *ProtectionPlanReconciler) due(p *pass) (bool, string) {
	plan, spec := p.Obj, &p.Defaulted.Spec
	lb, lv := plan.Status.LastBackup, plan.Status.LastVerification
	if p.State.backupJob == nil || lb == nil || lb.Artifact == nil {
		return false, ""
	}
	switch {
	case lv == nil:
		return true, "the first successful backup"
	case !finished(lv.Result):
		return false, ""
	case verifyNowRequest(plan) != "":
		return true, fmt.Sprintf("the verify-now request %q", verifyNowRequest(plan))
	case spec.Verification.EveryNBackups != nil:
		n := *spec.Verification.EveryNBackups
		if plan.Status.BackupsSinceVerification >= n {
			return true, fmt.Sprintf("%d successful backup(s) since the last verification (everyNBackups %d)", plan.Status.BackupsSinceVerification, n)
		}
		return false, ""
	case spec.Verification.Schedule != nil:
		sched, err := schedule.Parse(*spec.Verification.Schedule, spec.TimeZone)
		if err != nil {
			return false, "" // validated in check
		}
		anchor := plan.CreationTimestamp.Time
		switch {
		case lv.StartTime != nil:
			anchor = lv.StartTime.Time
		case lv.CompletionTime != nil:
			anchor = lv.CompletionTime.Time
		}
		next := sched.Next(anchor)
		plan.Status.NextVerificationTime = &metav1.Time{Time: next}
		if !p.State.now.Before(next) {
			return true, fmt.Sprintf("the verification schedule %q fired at %s", *spec.Verification.Schedule, next.In(sched.Location()).Format(time.RFC3339))
		}
		p.State.checkAt(next)
	}
	return false, ""
}

// start pins the newest successful backup's artifact, records the new
// verification in status (a checkpoint: a retry or a restart creates this
// RestoreJob for this artifact, never for a newer one) and creates its
// RestoreJob.
//
// A point-in-time verification (target set) restores to target instead
// (desiredRestoreJob); its artifact is the base the restore used, once
// reported.
func (r *ProtectionPlanReconciler) start(ctx context.Context, p *pass, why string, target *metav1.Time) error {
	plan := p.Obj
	if err := r.checkScratch(p); err != nil {
		return err
	}
	n := plan.Status.Verifications + 1
	lb := plan.Status.LastBackup
	lv := &platformv1.VerificationRecord{
		RestoreJob: fmt.Sprintf("%s-verify-%d", plan.Name, n),
		Artifact:   *lb.Artifact,
		BackupTime: lb.SuccessfulTime.DeepCopy(),
		Result:     platformv1.VerificationPending,
		Message:    "verifying after " + why,
		TargetTime: target,
	}
	if target != nil {
		lv.Message += ", to " + target.UTC().Format(time.RFC3339) + " (point in time)"
	}
	plan.Status.Verifications = n
	plan.Status.LastVerification = lv
	if id := verifyNowRequest(plan); id != "" {
		plan.Status.LastVerifyNowRequest = id // this verification answers it
	}
	plan.Status.BackupsSinceVerification = 0
	if err := p.Checkpoint(ctx); err != nil {
		return fmt.Errorf("recording verification %s: %w", lv.RestoreJob, err)
	}
	ctrl.LoggerFrom(ctx).Info("verification decided", "RestoreJob", lv.RestoreJob, "artifact", lv.Artifact.Path, "why", why)
	return r.createRestoreJob(ctx, p, plan.Status.LastVerification)
}

// checkScratch re-checks, before a verification runs, that the scratch
// database is neither the plan's database nor the database the BackupJob
// actually backs up.
func (r *ProtectionPlanReconciler) checkScratch(p *pass) error {
	target := planspec.ScratchTarget(&p.Defaulted.Spec)
	dbs := []cairnv1.DatabaseRef{p.Defaulted.Spec.Database}
	if bj := p.State.backupJob; bj != nil {
		dbs = append(dbs, bj.Spec.Database)
	}
	for _, db := range dbs {
		if planspec.SameDatabase(db, target, p.Obj.Namespace) {
			return reconcile.Stalled(platformv1.ScratchIsProtectedReason,
				"the scratch database %s is the protected database; nothing is restored: change spec.verification.restoreInto", planspec.Describe(target))
		}
	}
	return nil
}

// createRestoreJob creates the RestoreJob of verification lv.
func (r *ProtectionPlanReconciler) createRestoreJob(ctx context.Context, p *pass, lv *platformv1.VerificationRecord) error {
	if err := r.checkScratch(p); err != nil {
		return err
	}
	desired := desiredRestoreJob(p.Obj, &p.Defaulted.Spec, lv)
	if op, err := reconcile.EnsureChild(ctx, p, r.applier, desired); err != nil || op == "" {
		return err // "" with no error: ours, not cached yet (looked at again)
	}
	ctrl.LoggerFrom(ctx).Info("verification RestoreJob created", "RestoreJob", desired.Name, "artifact", lv.Artifact.Path)
	lv.Result = platformv1.VerificationRunning
	return nil
}

// follow reads the running verification's RestoreJob into lv.
func (r *ProtectionPlanReconciler) follow(ctx context.Context, p *pass, lv *platformv1.VerificationRecord) error {
	plan := p.Obj
	rj := &restorev1.RestoreJob{}
	key := client.ObjectKey{Namespace: plan.Namespace, Name: lv.RestoreJob}
	err := r.Client.Get(ctx, key, rj)
	switch {
	case apierrors.IsNotFound(err) && lv.Result == platformv1.VerificationPending:
		return r.createRestoreJob(ctx, p, lv)
	case apierrors.IsNotFound(err):
		if lerr := r.APIReader.Get(ctx, key, rj); lerr == nil {
			p.RequeueAfter(time.Second) // the cache lags
			return nil
		} else if !apierrors.IsNotFound(lerr) {
			return fmt.Errorf("reading RestoreJob %s: %w", lv.RestoreJob, lerr)
		}
		finish(lv, platformv1.VerificationFailed, p.State.now,
			fmt.Sprintf("RestoreJob %s was deleted before it finished", lv.RestoreJob))
		return nil
	case err != nil:
		return fmt.Errorf("reading RestoreJob %s: %w", lv.RestoreJob, err)
	}
	if !metav1.IsControlledBy(rj, plan) {
		return reconcile.Stalled(cairnv1.NotControlledReason, "%s",
			(&ownership.NotControlledError{Kind: "RestoreJob", Key: key}).Error())
	}
	readRestoreJob(lv, rj, &p.Defaulted.Spec, p.State.now)
	return nil
}

// readRestoreJob sets lv from the RestoreJob's status.
func readRestoreJob(lv *platformv1.VerificationRecord, rj *restorev1.RestoreJob, spec *platformv1.ProtectionPlanSpec, now time.Time) {
	lv.StartTime = rj.Status.StartTime.DeepCopy()
	ready := conditions.Get(rj, cairnv1.ReadyCondition)
	msg := ""
	if ready != nil {
		msg = ready.Message
	}
	switch rj.Status.Phase {
	case restorev1.PhaseSucceeded:
		lv.CompletionTime = rj.Status.CompletionTime.DeepCopy()
		if lv.StartTime != nil && lv.CompletionTime != nil {
			lv.RestoreDuration = &metav1.Duration{Duration: lv.CompletionTime.Sub(lv.StartTime.Time).Round(time.Second)}
		}
		if lv.TargetTime != nil {
			if failure := readPointInTime(lv, rj); failure != "" {
				lv.Reason = platformv1.RecoveryPointMismatchReason
				finish(lv, platformv1.VerificationFailed, now, failure)
				return
			}
			msg += "; recovered to " + lv.TargetTime.UTC().Format(time.RFC3339) + " from base " + lv.Artifact.Path
		}
		if names := checkNames(spec, lv); len(names) > 0 {
			if failed, ok := checkResults(lv, rj, names); !ok {
				// The restore did not report the checks (an agent image
				// older than the checks): a restore alone does not prove
				// what the plan asks for.
				finish(lv, platformv1.VerificationFailed, now, fmt.Sprintf(
					"the restore succeeded (%s), but checks %s were not run: RestoreJob %s reported no results for them, so the backup is not counted as verified",
					msg, strings.Join(names, ", "), rj.Name))
				return
			} else if len(failed) > 0 {
				finish(lv, platformv1.VerificationFailed, now, "the restore succeeded, but checks failed: "+strings.Join(failed, "; "))
				return
			}
			msg += "; checks passed: " + strings.Join(names, ", ")
		}
		finish(lv, platformv1.VerificationSucceeded, now, msg)
	case restorev1.PhaseFailed:
		lv.CompletionTime = rj.Status.CompletionTime.DeepCopy()
		if ready != nil {
			lv.Reason = ready.Reason
		}
		if names := checkNames(spec, lv); len(names) > 0 && len(rj.Status.Checks) > 0 {
			// The restore ran but a check failed (reason ChecksFailed):
			// show every result.
			checkResults(lv, rj, names)
		}
		finish(lv, platformv1.VerificationFailed, now, msg)
	default:
		if conditions.IsTrue(rj, cairnv1.StalledCondition) {
			finish(lv, platformv1.VerificationFailed, now, fmt.Sprintf("RestoreJob %s cannot start: %s", rj.Name, msg))
			return
		}
		lv.Result = platformv1.VerificationRunning
		if msg != "" {
			lv.Message = msg
		}
	}
}

// checkResults copies the RestoreJob's check results into lv. ok is false
// when a check in names has no result; failed describes each failed check.
func checkResults(lv *platformv1.VerificationRecord, rj *restorev1.RestoreJob, names []string) (failed []string, ok bool) {
	byName := map[string]restorev1.CheckResult{}
	for _, r := range rj.Status.Checks {
		byName[r.Name] = r
	}
	lv.Checks = nil
	for _, n := range names {
		r, found := byName[n]
		if !found {
			return nil, false
		}
		lv.Checks = append(lv.Checks, r)
		if !r.Passed {
			failed = append(failed, fmt.Sprintf("%s (value %q: %s)", n, r.Value, r.Message))
		}
	}
	return failed, true
}

func checkNames(spec *platformv1.ProtectionPlanSpec, lv *platformv1.VerificationRecord) []string {
	var names []string
	for _, c := range verificationChecks(spec, lv) {
		names = append(names, c.Name)
	}
	return names
}

// finish ends verification lv with result and message.
func finish(lv *platformv1.VerificationRecord, result platformv1.VerificationResult, now time.Time, msg string) {
	lv.Result = result
	lv.Message = msg
	if lv.CompletionTime == nil {
		lv.CompletionTime = &metav1.Time{Time: now}
	}
}

// setRecoverability sets RecoverabilityVerified from the newest finished
// verification, and records a success as the recovery point. A gap in a
// point-in-time archive (the BackupJob's PointInTimeReady False/ArchiveGap)
// fails it whatever the last verification found: times across the gap
// cannot be recovered.
func setRecoverability(plan *platformv1.ProtectionPlan, spec *platformv1.ProtectionPlanSpec, bj *backupv1.BackupJob) {
	lv := plan.Status.LastVerification
	typ := platformv1.RecoverabilityVerifiedCondition
	if lv != nil && lv.Result == platformv1.VerificationSucceeded {
		recordSuccess(plan, lv)
	}
	if gap := archiveGap(spec, bj); gap != nil {
		conditions.Set(plan, typ, metav1.ConditionFalse, platformv1.ArchiveGapReason,
			fmt.Sprintf("the point-in-time archive of BackupJob %s has a gap: %s", bj.Name, gap.Message))
		return
	}
	switch {
	case lv == nil && (plan.Status.LastBackup == nil || plan.Status.LastBackup.Artifact == nil):
		conditions.Set(plan, typ, metav1.ConditionUnknown, platformv1.NoVerificationYetReason,
			"waiting for the first successful backup to verify")
	case lv == nil:
		conditions.Set(plan, typ, metav1.ConditionUnknown, platformv1.NoVerificationYetReason,
			"the first verification is being created")
	case !finished(lv.Result):
		// The newest finished verification's result stands meanwhile.
		if conditions.Get(plan, typ) == nil || conditions.Get(plan, typ).Reason == platformv1.NoVerificationYetReason {
			conditions.Set(plan, typ, metav1.ConditionUnknown, platformv1.VerificationRunningReason,
				fmt.Sprintf("RestoreJob %s is restoring %s", lv.RestoreJob, lv.Artifact.Path))
		}
	case lv.Result == platformv1.VerificationSucceeded:
		msg := fmt.Sprintf("backup %s restored (RestoreJob %s)", lv.Artifact.Path, lv.RestoreJob)
		if lv.TargetTime != nil {
			msg = fmt.Sprintf("recovered to %s from backup %s and its archived log (RestoreJob %s)",
				lv.TargetTime.UTC().Format(time.RFC3339), lv.Artifact.Path, lv.RestoreJob)
		}
		if lv.RestoreDuration != nil {
			msg += " in " + lv.RestoreDuration.Duration.String()
		}
		conditions.Set(plan, typ, metav1.ConditionTrue, platformv1.VerificationSucceededReason, msg)
	default:
		what := "backup " + lv.Artifact.Path
		if lv.TargetTime != nil {
			what = "the recovery to " + lv.TargetTime.UTC().Format(time.RFC3339)
		}
		conditions.Set(plan, typ, metav1.ConditionFalse, failureReason(lv),
			fmt.Sprintf("verification of %s failed (RestoreJob %s): %s", what, lv.RestoreJob, lv.Message))
	}
}

// recordSuccess records succeeded verification lv, once: the newest
// successful verification, the recovery point it proved (the backup's
// time, or the point-in-time target) and the measured restore time.
func recordSuccess(plan *platformv1.ProtectionPlan, lv *platformv1.VerificationRecord) {
	if s := plan.Status.LastSuccessfulVerification; s != nil && s.RestoreJob == lv.RestoreJob {
		return
	}
	plan.Status.LastSuccessfulVerification = lv.DeepCopy()
	point := lv.BackupTime
	if lv.TargetTime != nil {
		point = lv.TargetTime
	}
	if point != nil && (plan.Status.RecoveryPoint == nil || point.After(plan.Status.RecoveryPoint.Time)) {
		plan.Status.RecoveryPoint = point.DeepCopy()
	}
	plan.Status.RestoreDuration = lv.RestoreDuration.DeepCopy()
}
