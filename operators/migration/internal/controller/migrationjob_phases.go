package controller

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"
	ctrl "sigs.k8s.io/controller-runtime"

	"cairn.dev/agent/contract"
	cairnv1 "cairn.dev/apis/meta/v1"
	migrationv1 "cairn.dev/apis/migration/v1"
	"cairn.dev/libs/access"
	"cairn.dev/libs/conditions"
	"cairn.dev/libs/reconcile"
	"cairn.dev/libs/references"
	"cairn.dev/libs/remote"
	"cairn.dev/operators/migration/internal/migspec"
)

// prepare applies defaults, ends the pass of a finished MigrationJob,
// validates the spec and checks the local objects it refers to.
func (r *MigrationJobReconciler) prepare(ctx context.Context, p *pass) error {
	mj := p.Obj
	p.State.spec = *mj.Spec.DeepCopy()
	p.State.spec.SetDefaults()
	if mj.Status.Phase == "" {
		mj.Status.Phase = migrationv1.PhasePending
	}
	if mj.Finished() {
		return reconcile.Done()
	}
	errs := migspec.ValidateName(mj.Name)
	errs = append(errs, migspec.ValidateSpec(&p.State.spec, field.NewPath("spec"))...)
	if ferr := migspec.SameDatabaseError(&p.State.spec, mj.Namespace, field.NewPath("spec")); ferr != nil {
		errs = append(errs, ferr)
	}
	if len(errs) > 0 {
		if migspec.SameDatabase(&p.State.spec, mj.Namespace) {
			return reconcile.Stalled(migrationv1.SameDatabaseReason, "the spec is invalid: %s", errs.ToAggregate().Error())
		}
		return reconcile.Stalled(cairnv1.InvalidSpecReason, "the spec is invalid: %s", errs.ToAggregate().Error())
	}
	// Only references the admission webhook approved (libs/access), only
	// an allow-listed image: checked again here for objects that did not
	// pass the webhook.
	if checks := access.MigrationJobChecks(mj); !r.Guard.Approver.Approved(mj, access.MigrationJobKind, checks) {
		return reconcile.Stalled(cairnv1.ReferencesNotApprovedReason, "%s", access.NotApproved(mj, "MigrationJob", checks))
	}
	if img := p.State.spec.Image; img != "" && !r.AllowedImages.Allowed(img) {
		return reconcile.Stalled(cairnv1.ImageNotAllowedReason, "%s", r.AllowedImages.NotAllowed("spec.image", img))
	}
	if mj.Status.Phase == migrationv1.PhasePending {
		// References are checked before anything runs; later a missing
		// Secret shows in the step's Job (and its pod cannot start).
		prob, err := r.refs.Check(ctx, localReferences(mj.Namespace, &p.State.spec))
		if err != nil {
			return err
		}
		if prob != nil {
			return reconcile.Stalled(prob.Reason, "%s", prob.Message)
		}
	}
	return nil
}

// connect finds the cluster and namespace of the target-side Jobs: the
// target cluster through its kubeconfig Secret for a Store transfer to a
// remote target, this cluster otherwise.
func (r *MigrationJobReconciler) connect(ctx context.Context, p *pass) error {
	mj, spec := p.Obj, &p.State.spec
	p.State.target, p.State.targetNS = r.Client, mj.Namespace
	if !runsRemote(spec) {
		return nil
	}
	ref := spec.Target.KubeconfigSecretRef
	c, err := r.Remote.Get(ctx, remote.SecretRef{Namespace: mj.Namespace, Name: ref.Name, Key: ref.Key})
	var rerr *remote.Error
	if errors.As(err, &rerr) {
		return r.wait(p, migrationv1.TargetClusterReason, "target cluster: %s", rerr.Message)
	}
	if err != nil {
		return err
	}
	p.State.target, p.State.targetNS, p.State.remote = c, targetNamespace(mj), true
	if mj.Status.Phase == migrationv1.PhasePending {
		chk := &references.Checker{Metadata: c, Live: c}
		prob, err := chk.Check(ctx, remoteReferences(p.State.targetNS, spec))
		if err != nil {
			return r.wait(p, migrationv1.TargetClusterReason, "target cluster: %v", err)
		}
		if prob != nil {
			return r.wait(p, prob.Reason, "in the target cluster: %s", prob.Message)
		}
	}
	return nil
}

// advance moves the phase along as far as the steps' Jobs allow in one pass.
func (r *MigrationJobReconciler) advance(ctx context.Context, p *pass) error {
	mj, spec := p.Obj, &p.State.spec
	for range 16 {
		before := mj.Status.Phase
		if mj.Status.Abort != nil {
			return r.abort(ctx, p)
		}
		var err error
		switch mj.Status.Phase {
		case migrationv1.PhasePending:
			now := metav1.Now()
			mj.Status.StartTime = &now
			mj.Status.Phase = migrationv1.PhasePrechecking
		case migrationv1.PhasePrechecking:
			err = r.precheck(ctx, p)
		case migrationv1.PhaseCopying:
			err = r.copy(ctx, p)
		case migrationv1.PhaseVerifying:
			err = r.verify(ctx, p)
		case migrationv1.PhaseReadyForCutover:
			err = r.readyForCutover(ctx, p)
		case migrationv1.PhaseCuttingOver:
			err = r.cutover(ctx, p)
		default:
			return reconcile.Done()
		}
		if errors.Is(err, errAborting) {
			continue // the abort step runs, then the migration fails
		}
		if err != nil {
			return err
		}
		if mj.Status.Phase == before {
			return nil
		}
		ctrl.LoggerFrom(ctx).Info("phase", "from", before, "to", mj.Status.Phase, "mode", spec.Mode)
	}
	return nil
}

// precheck runs the precheck (one Job, or one per side for a Store
// transfer) and decides: problems → Failed, dryRun → Succeeded, else Copying.
func (r *MigrationJobReconciler) precheck(ctx context.Context, p *pass) error {
	mj, spec := p.Obj, &p.State.spec
	if mj.Status.Precheck == nil {
		mj.Status.Precheck = &migrationv1.PrecheckResult{}
	}
	merge := func(res *contract.MigrationResult) error {
		if res == nil {
			return errors.New("the precheck Job completed without reporting a result")
		}
		pr := mj.Status.Precheck
		if res.SourceVersion != "" {
			pr.SourceVersion = res.SourceVersion
		}
		if res.TargetVersion != "" {
			pr.TargetVersion = res.TargetVersion
		}
		if res.Tables > 0 {
			pr.Tables = int32(res.Tables)
		}
		if res.EstimatedBytes > 0 {
			pr.EstimatedBytes = res.EstimatedBytes
		}
		pr.Problems = appendLimited(pr.Problems, res.Problems...)
		return nil
	}
	var steps []stepRun
	if spec.Transfer.Method == migrationv1.TransferDirect {
		steps = []stepRun{{step: contract.StepPrecheck, onResult: merge}}
	} else {
		steps = []stepRun{
			{step: contract.StepPrecheckSource, onResult: merge},
			{step: contract.StepPrecheckTarget, target: true, onResult: merge},
		}
	}
	done, err := r.runSteps(ctx, p, migrationv1.PhasePrechecking, "checking source and target", steps...)
	if err != nil || !done {
		return err
	}
	pr := mj.Status.Precheck
	if len(pr.Problems) > 0 {
		msg := fmt.Sprintf("the precheck found %d problem(s): %s", len(pr.Problems), strings.Join(pr.Problems, "; "))
		conditions.Set(mj, migrationv1.PrecheckedCondition, metav1.ConditionFalse, migrationv1.PrecheckFailedReason, msg)
		return r.fail(p, migrationv1.PrecheckFailedReason, msg+"; nothing was copied; fix them and create a new MigrationJob")
	}
	pr.Passed = true
	mj.Status.Progress.TablesTotal = pr.Tables
	msg := fmt.Sprintf("source %s (%s) and target %s (%s) checked: %d table(s), about %d bytes",
		migspec.Describe(spec.Source), orUnknown(pr.SourceVersion), migspec.Describe(spec.Target.DatabaseRef), orUnknown(pr.TargetVersion), pr.Tables, pr.EstimatedBytes)
	conditions.Set(mj, migrationv1.PrecheckedCondition, metav1.ConditionTrue, migrationv1.PrecheckPassedReason, msg)
	if spec.DryRun {
		return r.succeed(p, migrationv1.DryRunReason, "dry run: the precheck passed ("+msg+"); nothing was copied")
	}
	mj.Status.Phase = migrationv1.PhaseCopying
	return nil
}

// copy copies schema and data: one copy Job (Direct), or export here and
// import in the target's cluster (Store); then, in Continuous mode, starts
// replication.
func (r *MigrationJobReconciler) copy(ctx context.Context, p *pass) error {
	mj, spec := p.Obj, &p.State.spec
	progress := func(res *contract.MigrationResult) error {
		if res != nil {
			mj.Status.Progress.TablesDone = int32(res.TablesDone)
			mj.Status.Progress.Bytes = max(mj.Status.Progress.Bytes, res.Bytes)
		}
		return nil
	}
	var steps []stepRun
	if spec.Transfer.Method == migrationv1.TransferDirect {
		steps = []stepRun{{step: contract.StepCopy, onResult: progress}}
	} else {
		steps = []stepRun{
			{step: contract.StepExport, onResult: func(res *contract.MigrationResult) error {
				if res == nil || res.Artifact == "" {
					return errors.New("the export Job completed without reporting its artifact")
				}
				mj.Status.Artifact = &cairnv1.Artifact{Path: res.Artifact, Size: res.Size, Checksum: res.Checksum}
				mj.Status.Progress.Bytes = max(mj.Status.Progress.Bytes, res.Bytes)
				return nil
			}},
			{step: contract.StepImport, target: true, after: contract.StepExport, onResult: progress},
		}
	}
	if spec.Mode == migrationv1.ModeContinuous {
		steps = append(steps, stepRun{step: contract.StepReplicationStart, after: contract.StepCopy, onResult: r.recordReplication(p)})
	}
	done, err := r.runSteps(ctx, p, migrationv1.PhaseCopying, "copying "+string(spec.Mode), steps...)
	if err != nil || !done {
		return err
	}
	if mj.Status.Progress.TablesDone == 0 {
		mj.Status.Progress.TablesDone = mj.Status.Progress.TablesTotal
	}
	conditions.Set(mj, migrationv1.CopiedCondition, metav1.ConditionTrue, migrationv1.CopiedReason,
		fmt.Sprintf("copied %d table(s), %d bytes (%s, %s transfer)", mj.Status.Progress.TablesDone, mj.Status.Progress.Bytes, spec.Mode, spec.Transfer.Method))
	if spec.Verify == migrationv1.VerifyNone {
		conditions.Set(mj, migrationv1.VerifiedCondition, metav1.ConditionTrue, migrationv1.VerificationSkippedReason, "spec.verify is None: the target was not compared with the source")
		mj.Status.Phase = migrationv1.PhaseReadyForCutover
		return nil
	}
	mj.Status.Phase = migrationv1.PhaseVerifying
	return nil
}

// verify compares the target with the source; a difference fails the
// migration, naming the tables.
func (r *MigrationJobReconciler) verify(ctx context.Context, p *pass) error {
	mj, spec := p.Obj, &p.State.spec
	onResult := func(res *contract.MigrationResult) error {
		if res == nil || res.Verification == nil {
			return errors.New("the verify Job completed without reporting a verification")
		}
		mj.Status.Verification = verificationStatus(res.Verification)
		return nil
	}
	if spec.Mode == migrationv1.ModeContinuous {
		// The slot exists: its retained WAL is watched while verify waits
		// for the subscription's table synchronisation.
		if err := r.checkReplication(ctx, p); err != nil || mj.Finished() {
			return err
		}
	}
	st := stepRun{step: contract.StepVerify, target: spec.Transfer.Method == migrationv1.TransferStore, onResult: onResult}
	done, err := r.runSteps(ctx, p, migrationv1.PhaseVerifying, "verifying with "+string(spec.Verify), st)
	if err != nil || !done {
		return err
	}
	v := mj.Status.Verification
	if v.Mismatched > 0 {
		msg := fmt.Sprintf("%d of %d table(s) differ: %s", v.Mismatched, v.Tables, strings.Join(differingTables(v), ", "))
		conditions.Set(mj, migrationv1.VerifiedCondition, metav1.ConditionFalse, migrationv1.VerificationFailedReason, msg)
		return r.fail(p, migrationv1.VerificationFailedReason, "verification failed: "+msg+"; the source is untouched, no cutover was done")
	}
	conditions.Set(mj, migrationv1.VerifiedCondition, metav1.ConditionTrue, migrationv1.VerificationPassedReason, v.Summary)
	mj.Status.Phase = migrationv1.PhaseReadyForCutover
	return nil
}

// readyForCutover waits for approval (Manual) and, in Continuous mode,
// checks replication every ReplicationInterval.
func (r *MigrationJobReconciler) readyForCutover(ctx context.Context, p *pass) error {
	mj, spec := p.Obj, &p.State.spec
	if spec.Mode == migrationv1.ModeContinuous {
		if err := r.checkReplication(ctx, p); err != nil || mj.Finished() {
			return err
		}
	}
	if spec.Cutover.Mode == migrationv1.CutoverManual && !spec.Cutover.Approved {
		msg := "copied and verified; waiting for approval: set spec.cutover.approved to true to cut over (" + describeCutover(spec) + ")"
		conditions.Set(mj, migrationv1.CutOverCondition, metav1.ConditionFalse, migrationv1.AwaitingApprovalReason, msg)
		conditions.MarkNotReady(mj, migrationv1.AwaitingApprovalReason, msg)
		return reconcile.Done()
	}
	if migspec.NeedsWritesStopped(spec) && !migspec.WritesStopped(spec) {
		why := "a Full cutover that switches Secret " + switchName(spec) + " would leave rows written to the source after it behind"
		if spec.Mode == migrationv1.ModeContinuous {
			why = "stopping replication while the source is written would lose the rows written after it"
		}
		msg := "copied and verified; waiting until writes to the source are stopped: " + why +
			"; stop the applications writing to it and set spec.cutover.writersStopped to true (cutover then compares again before switching)"
		conditions.Set(mj, migrationv1.CutOverCondition, metav1.ConditionFalse, migrationv1.AwaitingWritersStoppedReason, msg)
		conditions.MarkNotReady(mj, migrationv1.AwaitingWritersStoppedReason, msg)
		return reconcile.Done()
	}
	now := metav1.Now()
	mj.Status.Cutover = &migrationv1.CutoverStatus{StartTime: &now}
	mj.Status.Phase = migrationv1.PhaseCuttingOver
	return nil
}

// cutover does what spec.cutover declares, all or nothing, in order: stop
// the writes (make the source read-only, or the user declared it); Full:
// compare the source again with the target (the cutover step; a
// difference fails the migration, nothing switched, the read-only undone);
// Continuous: replication-stop (waits until the target applied everything
// written before the stop, then sequences, then drops replication); then
// switch the named Secret to the target. A failure on the way runs the
// abort step, which undoes the read-only.
func (r *MigrationJobReconciler) cutover(ctx context.Context, p *pass) error {
	mj, spec := p.Obj, &p.State.spec
	if mj.Status.Cutover == nil {
		now := metav1.Now()
		mj.Status.Cutover = &migrationv1.CutoverStatus{StartTime: &now}
	}
	var steps []stepRun
	if spec.Cutover.SourceReadOnly || finalCheck(spec) {
		steps = append(steps, stepRun{step: contract.StepCutover, onResult: func(res *contract.MigrationResult) error {
			// What the agent did on the source, kept for the final list.
			if res == nil {
				if finalCheck(spec) {
					return errors.New("the cutover Job completed without reporting its comparison of the source with the target")
				}
				return nil
			}
			for _, a := range res.Actions {
				if !strings.HasPrefix(a, "re-copied ") { // that one wrote the target
					a = "source: " + a
				}
				mj.Status.Cutover.Actions = append(mj.Status.Cutover.Actions, a)
			}
			if finalCheck(spec) {
				if res.Verification == nil {
					return errors.New("the cutover Job did not report its comparison of the source with the target")
				}
				v := verificationStatus(res.Verification)
				v.Summary += atCutover
				mj.Status.Verification = v
			}
			return nil
		}})
	}
	if spec.Mode == migrationv1.ModeContinuous {
		if mj.Status.Step(contract.StepReplicationStop) == nil {
			// The slot's retained WAL is watched until replication-stop,
			// which enforces the limit itself while it waits.
			if err := r.checkReplication(ctx, p); err != nil || mj.Finished() {
				return err
			}
		}
		after := ""
		if spec.Cutover.SourceReadOnly {
			after = contract.StepCutover
		}
		steps = append(steps, stepRun{step: contract.StepReplicationStop, after: after, onResult: func(res *contract.MigrationResult) error {
			if err := r.recordReplication(p)(res); err != nil {
				return err
			}
			if err := recordExactCheck(mj, res); err != nil {
				return err
			}
			mj.Status.Replication.Stopped = true
			return nil
		}})
	}
	done, err := r.runSteps(ctx, p, migrationv1.PhaseCuttingOver, "cutting over: "+describeCutover(spec), steps...)
	if err != nil || !done {
		return err
	}
	if v := mj.Status.Verification; finalCheck(spec) && v != nil && v.Mismatched > 0 {
		var bad []string
		for _, it := range v.Items {
			if !it.Match {
				bad = append(bad, fmt.Sprintf("%s (%s: source %d rows, target %d)", it.Table, it.Reason, it.SourceRows, it.TargetRows))
			}
		}
		msg := fmt.Sprintf("the source changed since verification: with writes stopped, %d of %d table(s) differ from the target: %s",
			v.Mismatched, v.Tables, strings.Join(bad, ", "))
		conditions.Set(mj, migrationv1.CutOverCondition, metav1.ConditionFalse, migrationv1.SourceChangedReason, msg)
		return r.fail(p, migrationv1.SourceChangedReason, msg+"; nothing was switched, the source stays in use (writable again); create a new MigrationJob to copy it again")
	}
	actions := []string{}
	if spec.Cutover.SourceReadOnly {
		actions = append(actions, "made the source "+migspec.Describe(spec.Source)+" read-only")
	} else if spec.Cutover.WritersStopped {
		actions = append(actions, "writes to the source declared stopped (spec.cutover.writersStopped)")
	}
	if finalCheck(spec) {
		actions = append(actions, "compared the source again with writes stopped: "+strings.TrimSuffix(mj.Status.Verification.Summary, atCutover))
	}
	if spec.Mode == migrationv1.ModeContinuous {
		actions = append(actions, "stopped replication after the target applied every change written before the stop (sequences synced)")
		if v := mj.Status.Verification; spec.Verify != migrationv1.VerifyNone && v != nil {
			actions = append(actions, "compared exactly with writes stopped: "+strings.TrimSuffix(v.Summary, atCutover))
		}
	}
	if s := spec.Cutover.SwitchSecret; s != nil {
		if err := r.switchSecret(ctx, mj, spec); err != nil {
			return err
		}
		actions = append(actions, fmt.Sprintf("switched Secret %s to %s", s.Name, migspec.Describe(spec.Target.DatabaseRef)))
	}
	if len(actions) == 0 {
		actions = append(actions, "nothing declared (no sourceReadOnly, no switchSecret): the target is ready, switch your applications to it")
	}
	now := metav1.Now()
	actions = append(actions, mj.Status.Cutover.Actions...) // the agent's own report of the cutover step
	mj.Status.Cutover.Actions = actions
	mj.Status.Cutover.Time = &now
	msg := "cut over: " + strings.Join(actions, "; ")
	conditions.Set(mj, migrationv1.CutOverCondition, metav1.ConditionTrue, migrationv1.CutOverReason, msg)
	return r.succeed(p, cairnv1.SucceededReason, fmt.Sprintf("migrated %s to %s; %s", migspec.Describe(spec.Source), migspec.Describe(spec.Target.DatabaseRef), msg))
}

// atCutover ends the summary of the comparison cutover made.
const atCutover = " at cutover, writes stopped"

func switchName(spec *migrationv1.MigrationJobSpec) string {
	if s := spec.Cutover.SwitchSecret; s != nil {
		return s.Name
	}
	return ""
}

// checkReplication runs a replication-status Job every ReplicationInterval
// and aborts above the retained-WAL limit (stopping replication first).
func (r *MigrationJobReconciler) checkReplication(ctx context.Context, p *pass) error {
	mj, spec := p.Obj, &p.State.spec
	limit := spec.MaxRetainedWALBytes()
	if rep := mj.Status.Replication; rep != nil && rep.RetainedWALBytes > limit {
		// Abort: the abort step drops the slot before the migration fails,
		// so the source's disk is safe.
		return r.fail(p, migrationv1.RetainedWALLimitReason, fmt.Sprintf(
			"the replication slot retained %d bytes of WAL, above spec.replication.maxRetainedWAL (%d bytes); the target is not cut over",
			mj.Status.Replication.RetainedWALBytes, limit))
	}
	st := mj.Status.Step(contract.StepReplicationStatus)
	if st != nil && st.Phase == migrationv1.StepSucceeded {
		last := st.CompletionTime
		if last != nil && time.Since(last.Time) < r.ReplicationInterval {
			p.RequeueAfter(r.ReplicationInterval - time.Since(last.Time))
			return nil
		}
		// The next check: a new Job (the old one is deleted).
		r.deleteStepJob(ctx, p, st)
		mj.Status.Replication.Checks++
		st.JobName = stepJobName(mj, contract.StepReplicationStatus, mj.Status.Replication.Checks)
		st.Phase, st.StartTime, st.CompletionTime, st.Message = migrationv1.StepPending, nil, nil, ""
		// The new name is stored before its Job exists.
		if err := p.Checkpoint(ctx); err != nil {
			return fmt.Errorf("recording replication check %d: %w", mj.Status.Replication.Checks, err)
		}
	}
	_, err := r.runSteps(ctx, p, mj.Status.Phase, "", stepRun{step: contract.StepReplicationStatus, quiet: true,
		onResult: r.recordReplication(p), onFailure: func(f *contract.FailedError) error {
			if f != nil && f.Code == contract.CodeRetainedWALOverLimit {
				if mj.Status.Replication == nil {
					mj.Status.Replication = &migrationv1.ReplicationStatus{}
				}
				mj.Status.Replication.RetainedWALBytes = max(mj.Status.Replication.RetainedWALBytes, limit+1)
				return nil // handled: the next pass stops replication and fails
			}
			return errNotHandled
		}})
	if err != nil {
		return err
	}
	if mj.Status.Replication != nil && mj.Status.Replication.RetainedWALBytes > limit {
		p.RequeueAfter(time.Millisecond)
	} else if st := mj.Status.Step(contract.StepReplicationStatus); st != nil && st.Phase == migrationv1.StepSucceeded {
		p.RequeueAfter(r.ReplicationInterval) // the next check
	}
	return nil
}

var errNotHandled = errors.New("not handled")

// recordReplication stores what a replication step reported.
func (r *MigrationJobReconciler) recordReplication(p *pass) func(*contract.MigrationResult) error {
	return func(res *contract.MigrationResult) error {
		mj := p.Obj
		if mj.Status.Replication == nil {
			mj.Status.Replication = &migrationv1.ReplicationStatus{}
		}
		rs := mj.Status.Replication
		now := metav1.Now()
		rs.LastCheckTime = &now
		if res == nil || res.Replication == nil {
			return nil
		}
		rep := res.Replication
		rs.Publication, rs.Subscription, rs.Slot = rep.Publication, rep.Subscription, rep.Slot
		rs.LagBytes, rs.RetainedWALBytes = rep.LagBytes, rep.RetainedWALBytes
		rs.LagSeconds = lagSeconds(rep.LagSeconds)
		rs.SyncedTables, rs.Tables = int32(rep.SyncedTables), int32(rep.Tables)
		rs.NotReplicated = rep.NotReplicated
		if len(rs.NotReplicated) > 64 {
			rs.NotReplicated = rs.NotReplicated[:64]
		}
		return nil
	}
}

// errAborting: the migration is failing, and the abort step runs first.
var errAborting = errors.New("aborting")

// fail ends the migration: phase Failed, Stalled with reason and message.
// A migration that may have changed the source (replication objects, a
// read-only cutover) first records the failure in status.abort and returns
// errAborting: the abort step undoes those changes, then abort fails it.
func (r *MigrationJobReconciler) fail(p *pass, reason, msg string) error {
	mj := p.Obj
	if ab := mj.Status.Abort; ab != nil {
		// The abort itself failed.
		return r.failed(p, ab.Reason, ab.Message+"; undoing the migration's changes to the source failed ("+msg+"): "+leftOnSource(mj))
	}
	if needsAbort(mj) {
		mj.Status.Abort = &migrationv1.AbortStatus{Reason: reason, Message: msg}
		conditions.MarkReconciling(mj, migrationv1.AbortingReason, "failing ("+reason+"): first undoing what the migration changed on the source; "+msg)
		return errAborting
	}
	return r.failed(p, reason, msg)
}

// abort runs the abort step of a failing migration, then fails it with the
// recorded reason.
func (r *MigrationJobReconciler) abort(ctx context.Context, p *pass) error {
	mj, spec := p.Obj, &p.State.spec
	ab := mj.Status.Abort
	done, err := r.runSteps(ctx, p, mj.Status.Phase, "",
		stepRun{step: contract.StepAbort, quiet: true, onResult: func(res *contract.MigrationResult) error {
			if spec.Mode == migrationv1.ModeContinuous {
				if err := r.recordReplication(p)(res); err != nil {
					return err
				}
				mj.Status.Replication.Stopped = true
			}
			return nil
		}})
	if err != nil || !done {
		if st := mj.Status.Step(contract.StepAbort); err == nil && st != nil {
			conditions.MarkReconciling(mj, migrationv1.AbortingReason, fmt.Sprintf(
				"failing (%s): undoing what the migration changed on the source (Job %s/%s), then Failed: %s", ab.Reason, st.Namespace, st.JobName, ab.Message))
		}
		return err
	}
	var undone []string
	if replicationMayRun(mj) || spec.Mode == migrationv1.ModeContinuous {
		undone = append(undone, "replication stopped: slot dropped, publication and subscription dropped")
	}
	if readOnlyMayBeSet(mj, spec) {
		undone = append(undone, "the source is writable again")
	}
	return r.failed(p, ab.Reason, ab.Message+"; undone on the source: "+strings.Join(undone, ", "))
}

// leftOnSource says what a migration whose abort did not run may have left
// on the source, and how to remove it by hand.
func leftOnSource(mj *migrationv1.MigrationJob) string {
	var out []string
	if replicationMayRun(mj) {
		what := "publication, replication slot and subscription named cairn_<hash>_pub/_slot/_sub"
		if rep := mj.Status.Replication; rep != nil && rep.Slot != "" {
			what = fmt.Sprintf("publication %s and replication slot %s on the source, subscription %s on the target", rep.Publication, rep.Slot, rep.Subscription)
		}
		out = append(out, "replication may still run and retain WAL: drop the "+what+" by hand")
	}
	if readOnlyMayBeSet(mj, &mj.Spec) {
		out = append(out, "the source may still be read-only: ALTER DATABASE … RESET default_transaction_read_only (MySQL: ALTER SCHEMA … READ ONLY = 0)")
	}
	if len(out) == 0 {
		return "nothing left on the source"
	}
	return strings.Join(out, "; ")
}

// failed marks the migration Failed.
func (r *MigrationJobReconciler) failed(p *pass, reason, msg string) error {
	mj := p.Obj
	now := metav1.Now()
	mj.Status.Phase = migrationv1.PhaseFailed
	mj.Status.CompletionTime = &now
	conditions.MarkStalled(mj, reason, msg)
	return reconcile.Done()
}

// succeed ends the migration: phase Succeeded, Ready.
func (r *MigrationJobReconciler) succeed(p *pass, reason, msg string) error {
	mj := p.Obj
	now := metav1.Now()
	mj.Status.Phase = migrationv1.PhaseSucceeded
	mj.Status.CompletionTime = &now
	conditions.MarkReady(mj, reason, msg)
	return reconcile.Done()
}

// wait ends the pass of a MigrationJob waiting for something outside.
func (r *MigrationJobReconciler) wait(p *pass, reason, format string, args ...any) error {
	return reconcile.Waiting(r.PollInterval, reason, format, args...)
}

func verificationStatus(v *contract.Verification) *migrationv1.Verification {
	out := &migrationv1.Verification{
		Method: migrationv1.VerifyMethod(v.Method), Tables: int32(v.Tables), Matched: int32(v.Matched),
		Mismatched: int32(v.Mismatched), Truncated: int32(v.Truncated), CatchingUp: int32(v.CatchingUp),
	}
	for _, it := range v.Items {
		out.Items = append(out.Items, migrationv1.TableVerification{Table: it.Table, SourceRows: it.SourceRows,
			TargetRows: it.TargetRows, Match: it.Match, Reason: it.Reason, State: it.State, Rechecks: int32(it.Rechecks),
			Rows: int32(it.Rows), LagBytes: it.LagBytes})
	}
	if len(out.Items) > 1000 {
		out.Truncated += int32(len(out.Items) - 1000)
		out.Items = out.Items[:1000]
	}
	out.Summary = fmt.Sprintf("%d/%d tables match (%s)", v.Matched, v.Tables, v.Method)
	if v.CatchingUp > 0 {
		out.Summary += fmt.Sprintf(", %d catching up", v.CatchingUp)
	}
	if v.Mismatched > 0 {
		out.Summary = fmt.Sprintf("%d/%d tables differ (%s)", v.Mismatched, v.Tables, v.Method)
	}
	return out
}

func describeCutover(spec *migrationv1.MigrationJobSpec) string {
	var parts []string
	if spec.Cutover.SourceReadOnly {
		parts = append(parts, "make the source read-only")
	}
	if finalCheck(spec) {
		parts = append(parts, "compare the source again with the target (a difference stops the cutover)")
	}
	if spec.Mode == migrationv1.ModeContinuous {
		parts = append(parts, "wait until the target applied every change written before the stop, then stop replication")
	}
	if s := spec.Cutover.SwitchSecret; s != nil {
		parts = append(parts, "switch Secret "+s.Name+" (host, port, database) to the target")
	}
	if len(parts) == 0 {
		return "no cutover action declared"
	}
	return strings.Join(parts, ", ")
}

func orUnknown(s string) string {
	if s == "" {
		return "version unknown"
	}
	return s
}

func appendLimited(list []string, more ...string) []string {
	for _, m := range more {
		if len(list) >= 64 {
			break
		}
		list = append(list, m)
	}
	return list
}
