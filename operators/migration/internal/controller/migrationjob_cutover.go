package controller

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"cairn.dev/agent/contract"
	cairnv1 "cairn.dev/apis/meta/v1"
	migrationv1 "cairn.dev/apis/migration/v1"
	"cairn.dev/libs/conditions"
	"cairn.dev/libs/reconcile"
	"cairn.dev/operators/migration/internal/migspec"
)

// readyForCutover waits for approval (Manual) and, in Continuous mode,
// checks replication every ReplicationInterval.
func (r *MigrationJobReconciler) readyForCutover(ctx context.Context, p *pass) error {
	mj, spec := p.Obj, &p.Defaulted.Spec
	if spec.Mode == migrationv1.ModeContinuous {
		if err := r.checkReplication(ctx, p); err != nil || mj.Finished() {
			return err
		}
	}
	if spec.Cutover.Mode == migrationv1.CutoverManual && !spec.Cutover.Approved {
		msg := "copied and verified; waiting for approval: set spec.cutover.approved to true to cut over (" + describeCutover(spec) + ")"
		conditions.Set(mj, migrationv1.CutOverCondition, metav1.ConditionFalse, migrationv1.AwaitingApprovalReason, msg)
		p.State.decide(outcomeAwaiting, migrationv1.AwaitingApprovalReason, msg)
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
		p.State.decide(outcomeAwaiting, migrationv1.AwaitingWritersStoppedReason, msg)
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
	mj, spec := p.Obj, &p.Defaulted.Spec
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
	mj, spec := p.Obj, &p.Defaulted.Spec
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
