package controller

import (
	"context"
	"fmt"
	"strings"

	batchv1 "k8s.io/api/batch/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"cairn.dev/agent/contract"
	cairnv1 "cairn.dev/apis/meta/v1"
	migrationv1 "cairn.dev/apis/migration/v1"
	"cairn.dev/libs/agentjob"
	"cairn.dev/libs/reconcile"
)

// stepRun is one step a phase runs.
type stepRun struct {
	// step is the agent step (contract.Step…).
	step string
	// target: the Job runs where the target-side Jobs run (the target
	// cluster for a Store transfer to a remote target).
	target bool
	// after: the step starts only once this step has succeeded.
	after string
	// quiet: no Reconciling condition while it runs (replication checks).
	quiet bool
	// onResult records the step's result (nil when the Job completed
	// without a report) in status, once, in the pass that sees the Job
	// complete. An error fails the migration.
	onResult func(*contract.MigrationResult) error
	// onFailure may handle a failed Job by the agent's failure (nil when
	// it reported none; nil error: handled); errNotHandled fails the
	// migration.
	onFailure func(*contract.FailedError) error
}

// runSteps runs steps (each once, in dependency order) and reports whether
// all have succeeded. A failed step fails the migration (reconcile.Done).
func (r *MigrationJobReconciler) runSteps(ctx context.Context, p *pass, phase migrationv1.Phase, what string, steps ...stepRun) (bool, error) {
	mj := p.Obj
	all := true
	var running []string
	for _, s := range steps {
		if s.after != "" {
			if st := mj.Status.Step(s.after); st == nil || st.Phase != migrationv1.StepSucceeded {
				all = false
				continue
			}
		}
		done, err := r.runStep(ctx, p, s)
		if err != nil {
			return false, err
		}
		if mj.Finished() {
			return false, reconcile.Done()
		}
		if !done {
			all = false
			st := mj.Status.Step(s.step)
			where := ""
			if st.Cluster == migrationv1.ClusterTarget {
				where = " in the target cluster"
			}
			running = append(running, fmt.Sprintf("Job %s/%s%s", st.Namespace, st.JobName, where))
		}
	}
	if !all && len(running) > 0 && what != "" {
		p.State.decide(outcomeRunning, migrationv1.StepRunningReason, fmt.Sprintf("%s: %s running", what, strings.Join(running, ", ")))
	}
	return all, nil
}

// runStep ensures s's Job exists (libs/agentjob.Run: its name is recorded
// in status before the Job is created), and records its outcome once it
// finished. It returns true when the step has succeeded.
func (r *MigrationJobReconciler) runStep(ctx context.Context, p *pass, s stepRun) (bool, error) {
	log := ctrl.LoggerFrom(ctx)
	mj, spec := p.Obj, &p.Defaulted.Spec
	st := mj.Status.Step(s.step)
	switch {
	case st != nil && st.Phase == migrationv1.StepSucceeded:
		return true, nil
	case st != nil && st.Phase == migrationv1.StepFailed:
		return false, r.fail(p, migrationv1.StepFailedReason, fmt.Sprintf("step %s failed: %s", s.step, st.Message))
	}
	if st == nil {
		cluster, ns := migrationv1.ClusterLocal, mj.Namespace
		if s.target && p.State.remote {
			cluster, ns = migrationv1.ClusterTarget, p.State.targetNS
		}
		n := int32(0)
		if s.step == contract.StepReplicationStatus && mj.Status.Replication != nil {
			n = mj.Status.Replication.Checks
		}
		mj.Status.Steps = append(mj.Status.Steps, migrationv1.StepStatus{
			Step: s.step, AgentRun: cairnv1.AgentRun{JobName: stepJobName(mj, s.step, n)}, Cluster: cluster, Namespace: ns, Phase: migrationv1.StepPending,
		})
		if s.step == contract.StepReplicationStatus {
			if mj.Status.Replication == nil {
				mj.Status.Replication = &migrationv1.ReplicationStatus{}
			}
			mj.Status.Replication.Checks = max(mj.Status.Replication.Checks, n)
		}
		if !s.quiet {
			p.State.decide(outcomeRunning, migrationv1.StepRunningReason, fmt.Sprintf("starting step %s: Job %s/%s", s.step, ns, stepJobName(mj, s.step, n)))
		}
		st = mj.Status.Step(s.step)
	}
	c := r.clientFor(p, st)
	// live reads past the cache: the API reader here, the target
	// cluster's client (never cached) there.
	live := client.Reader(c)
	if st.Cluster == migrationv1.ClusterLocal {
		live = r.APIReader
	}
	run := agentjob.Run[contract.MigrationResult]{
		Record:    func() *cairnv1.AgentRun { return &mj.Status.Step(s.step).AgentRun },
		Namespace: st.Namespace, Client: c, Live: live, Checkpoint: p.Checkpoint,
		Render: func() (*batchv1.Job, error) {
			return r.desiredJob(mj, spec, mj.Status.Step(s.step), mj.Status.Artifact)
		},
		// A Job in the target cluster has no owner reference: the label
		// with the MigrationJob's UID says it is ours.
		Ours:    func(job *batchv1.Job) bool { return job.Labels[migrationv1.MigrationJobUIDLabel] == string(mj.UID) },
		NotOurs: fmt.Sprintf(" (it is not labelled %s=%s)", migrationv1.MigrationJobUIDLabel, mj.UID),
		Parse:   contract.ParseMigration, Grace: r.ResultGrace, Now: r.Clock.Now,
	}
	obs, err := run.Observe(ctx)
	if err != nil {
		return false, err
	}
	st = mj.Status.Step(s.step) // a checkpoint decoded the status anew
	p.RequeueAfter(obs.RequeueAfter)
	switch obs.State {
	case agentjob.RunPending:
		return false, nil
	case agentjob.RunRunning:
		if obs.Created {
			log.Info("step Job created", "step", s.step, "Job", st.JobName, "namespace", st.Namespace, "cluster", st.Cluster)
		}
		st.Phase = migrationv1.StepRunning
		if st.Cluster == migrationv1.ClusterTarget {
			p.RequeueAfter(r.PollInterval) // not watched: look again
		}
		return false, nil
	case agentjob.RunDeleted:
		now := metav1.Now()
		st.Phase, st.CompletionTime = migrationv1.StepFailed, &now
		st.Message = fmt.Sprintf("Job %s/%s was deleted before it finished", st.Namespace, st.JobName)
		return false, r.fail(p, migrationv1.JobDeletedReason, fmt.Sprintf(
			"step %s: Job %s/%s was deleted before it finished; the target may be partly written; create a new MigrationJob to try again", s.step, st.Namespace, st.JobName))
	case agentjob.RunSucceeded:
		if res := obs.Result; res != nil {
			st.Actions, st.Warnings = capLines(res.Actions), capLines(res.Warnings)
		}
		if s.onResult != nil {
			if err := s.onResult(obs.Result); err != nil {
				st.Phase, st.Message = migrationv1.StepFailed, err.Error()
				return false, r.fail(p, migrationv1.StepFailedReason, fmt.Sprintf("step %s: %v", s.step, err))
			}
		}
		st.Phase = migrationv1.StepSucceeded
		log.Info("step succeeded", "step", s.step, "Job", st.JobName)
		return true, nil
	}
	msg := fmt.Sprintf("Job %s/%s failed after %d attempt(s)", st.Namespace, st.JobName, obs.Job.Status.Failed)
	if obs.Outcome.Reason != "" {
		msg += ": " + obs.Outcome.Reason
	}
	if f := obs.FailureReason(); f != "" {
		msg += "; agent: " + f
	}
	st.Phase, st.Message = migrationv1.StepFailed, msg
	if s.onFailure != nil {
		if err := s.onFailure(obs.Failure); err == nil {
			return false, nil
		}
	}
	return false, r.fail(p, migrationv1.StepFailedReason, fmt.Sprintf("step %s: %s; create a new MigrationJob to try again", s.step, msg))
}

// clientFor is the client of the cluster a step's Job runs in.
func (r *MigrationJobReconciler) clientFor(p *pass, st *migrationv1.StepStatus) client.Client {
	if st.Cluster == migrationv1.ClusterTarget {
		return p.State.target
	}
	return r.Client
}

// deleteStepJob deletes a finished step's Job (replication checks, which
// repeat). Errors are logged: the finalizer deletes what is left.
func (r *MigrationJobReconciler) deleteStepJob(ctx context.Context, p *pass, st *migrationv1.StepStatus) {
	c := r.clientFor(p, st)
	job := &batchv1.Job{ObjectMeta: metav1.ObjectMeta{Namespace: st.Namespace, Name: st.JobName}}
	if err := c.Delete(ctx, job, client.PropagationPolicy(metav1.DeletePropagationBackground)); client.IgnoreNotFound(err) != nil {
		ctrl.LoggerFrom(ctx).Error(err, "deleting a finished replication-status Job", "Job", st.JobName)
	}
}

// stepJobName is the name of step's Job: <name>-<short step>, and a
// sequence number for the repeated replication-status.
func stepJobName(mj *migrationv1.MigrationJob, step string, n int32) string {
	short := map[string]string{
		contract.StepPrecheckSource:    "precheck-src",
		contract.StepPrecheckTarget:    "precheck-tgt",
		contract.StepReplicationStart:  "repl-start",
		contract.StepReplicationStop:   "repl-stop",
		contract.StepReplicationStatus: "rstatus",
	}[step]
	if short == "" {
		short = step
	}
	if step == contract.StepReplicationStatus {
		return fmt.Sprintf("%s-%s-%d", mj.Name, short, n)
	}
	return mj.Name + "-" + short
}

// maxReportLines bounds a step's Actions and Warnings (the CRD's maxItems).
const maxReportLines = 32

// capLines keeps the first maxReportLines lines, the last one saying how
// many were left out.
func capLines(lines []string) []string {
	if len(lines) <= maxReportLines {
		return lines
	}
	out := append([]string{}, lines[:maxReportLines-1]...)
	return append(out, fmt.Sprintf("... and %d more", len(lines)-maxReportLines+1))
}
