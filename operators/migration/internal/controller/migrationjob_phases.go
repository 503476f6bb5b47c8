package controller

import (
	"context"
	"errors"
	"fmt"
	"strings"

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

// begin gives a new MigrationJob its first phase
// (reconcile.Reconciler.Begin).
func begin(p *pass) {
	if p.Obj.Status.Phase == "" {
		p.Obj.Status.Phase = migrationv1.PhasePending
	}
}

// validate returns the defaulted spec's errors; a target that is the
// source stalls with SameDatabase (reconcile.Reconciler.Validate).
func validate(p *pass) (field.ErrorList, string) {
	mj, spec := p.Obj, &p.Defaulted.Spec
	reason := ""
	if migspec.SameDatabase(spec, mj.Namespace) {
		reason = migrationv1.SameDatabaseReason
	}
	return migspec.Validate(mj.Name, mj.Namespace, spec), reason
}

// check verifies the webhook's approval and the image, and, before
// anything runs, the local objects the spec refers to.
//
// A MigrationJob that started (past Pending) was approved when it did, and
// its spec cannot change since (the CRD's rules): if its approval is gone
// (removed while the webhook was not installed), nothing new starts, but
// the safety work does not wait — an abort runs, a Continuous migration's
// replication watchdog keeps checking the slot (and aborts over the
// limit), the finalizer's cleanup runs (advance, safetyOnly).
func (r *MigrationJobReconciler) check(ctx context.Context, p *pass) error {
	mj := p.Obj
	// Only references the admission webhook approved (libs/access), only
	// an allow-listed image: checked again here for objects that did not
	// pass the webhook.
	if err := reconcile.Approved(&r.Base, access.MigrationJob, mj); err != nil {
		if mj.Status.Phase == migrationv1.PhasePending || mj.Status.Phase == "" {
			return err
		}
		p.State.notApproved = err
	}
	if img := p.Defaulted.Spec.Image; img != "" && !r.AllowedImages.Allowed(img) {
		return reconcile.Stalled(cairnv1.ImageNotAllowedReason, "%s", r.AllowedImages.NotAllowed("spec.image", img))
	}
	if mj.Status.Phase == migrationv1.PhasePending {
		// References are checked before anything runs; later a missing
		// Secret shows in the step's Job (and its pod cannot start).
		prob, err := r.Refs.Check(ctx, localReferences(mj.Namespace, &p.Defaulted.Spec))
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
	mj, spec := p.Obj, &p.Defaulted.Spec
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

// advance moves the phase along as far as the steps' Jobs allow in one
// pass: each phase's handler (the phase machine, phases) runs that phase's
// Jobs and sets the next phase when they are done.
func (r *MigrationJobReconciler) advance(ctx context.Context, p *pass) error {
	mj, spec := p.Obj, &p.Defaulted.Spec
	for range 16 {
		before := mj.Status.Phase
		if mj.Status.Abort != nil {
			return r.abort(ctx, p)
		}
		if p.State.notApproved != nil {
			err := r.safetyOnly(ctx, p)
			if errors.Is(err, errAborting) {
				continue // the abort step runs, then the migration fails
			}
			return err
		}
		handle, ok := r.phases()[mj.Status.Phase]
		if !ok {
			return reconcile.Done() // Succeeded, Failed
		}
		err := handle(ctx, p)
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

// safetyOnly is a pass of a started MigrationJob whose approval is gone:
// a Continuous migration waiting for its cutover keeps its replication
// watchdog (which aborts over spec.replication.maxRetainedWAL), and is
// looked at again at the next check; anything else stalls with
// ReferencesNotApproved. Nothing new starts.
func (r *MigrationJobReconciler) safetyOnly(ctx context.Context, p *pass) error {
	mj, spec := p.Obj, &p.Defaulted.Spec
	var stalled *reconcile.StalledError
	if !errors.As(p.State.notApproved, &stalled) {
		return p.State.notApproved
	}
	if mj.Status.Phase != migrationv1.PhaseReadyForCutover || spec.Mode != migrationv1.ModeContinuous {
		return p.State.notApproved
	}
	if err := r.checkReplication(ctx, p); err != nil || mj.Finished() {
		return err
	}
	return reconcile.Waiting(r.ReplicationInterval, stalled.Reason, "%s; meanwhile only the replication watchdog runs "+
		"(it stops replication and fails the migration above spec.replication.maxRetainedWAL), and an abort or a deletion proceeds", stalled.Message)
}

// begin records the migration's start.
func (r *MigrationJobReconciler) begin(_ context.Context, p *pass) error {
	now := metav1.Now()
	p.Obj.Status.StartTime = &now
	p.Obj.Status.Phase = migrationv1.PhasePrechecking
	return nil
}

// precheck runs the precheck (one Job, or one per side for a Store
// transfer) and decides: problems → Failed, dryRun → Succeeded, else Copying.
func (r *MigrationJobReconciler) precheck(ctx context.Context, p *pass) error {
	mj, spec := p.Obj, &p.Defaulted.Spec
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
	mj, spec := p.Obj, &p.Defaulted.Spec
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
	mj, spec := p.Obj, &p.Defaulted.Spec
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
		p.State.decide(outcomeAborting, migrationv1.AbortingReason, "failing ("+reason+"): first undoing what the migration changed on the source; "+msg)
		return errAborting
	}
	return r.failed(p, reason, msg)
}

// abort runs the abort step of a failing migration, then fails it with the
// recorded reason.
func (r *MigrationJobReconciler) abort(ctx context.Context, p *pass) error {
	mj, spec := p.Obj, &p.Defaulted.Spec
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
			p.State.decide(outcomeAborting, migrationv1.AbortingReason, fmt.Sprintf(
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

// failed ends the migration Failed (summarize).
func (r *MigrationJobReconciler) failed(p *pass, reason, msg string) error {
	p.State.decide(outcomeFailed, reason, msg)
	return reconcile.Done()
}

// succeed ends the migration Succeeded (summarize).
func (r *MigrationJobReconciler) succeed(p *pass, reason, msg string) error {
	p.State.decide(outcomeSucceeded, reason, msg)
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
