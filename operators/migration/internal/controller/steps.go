package controller

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"cairn.dev/agent/contract"
	cairnv1 "cairn.dev/apis/meta/v1"
	migrationv1 "cairn.dev/apis/migration/v1"
	"cairn.dev/libs/agentjob"
	"cairn.dev/libs/conditions"
	"cairn.dev/libs/ownership"
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
	// onFailure may handle a failed Job (nil error: handled); errNotHandled
	// fails the migration.
	onFailure func(reason string) error
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
		conditions.MarkReconciling(mj, migrationv1.StepRunningReason, fmt.Sprintf("%s: %s running", what, strings.Join(running, ", ")))
	}
	return all, nil
}

// runStep ensures s's Job exists (its name checkpointed in status first),
// and records its outcome once it finished. It returns true when the step
// has succeeded.
func (r *MigrationJobReconciler) runStep(ctx context.Context, p *pass, s stepRun) (bool, error) {
	log := ctrl.LoggerFrom(ctx)
	mj, spec := p.Obj, &p.State.spec
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
			Step: s.step, JobName: stepJobName(mj, s.step, n), Cluster: cluster, Namespace: ns, Phase: migrationv1.StepPending,
		})
		if s.step == contract.StepReplicationStatus {
			if mj.Status.Replication == nil {
				mj.Status.Replication = &migrationv1.ReplicationStatus{}
			}
			mj.Status.Replication.Checks = max(mj.Status.Replication.Checks, n)
		}
		if !s.quiet {
			conditions.MarkReconciling(mj, migrationv1.StepRunningReason, fmt.Sprintf("starting step %s: Job %s/%s", s.step, ns, stepJobName(mj, s.step, n)))
		}
		// The name is stored before the Job exists: a restarted operator
		// finds this Job, never a second one.
		if err := p.Checkpoint(ctx); err != nil {
			return false, fmt.Errorf("recording step %s: %w", s.step, err)
		}
		st = mj.Status.Step(s.step)
	}
	c := r.clientFor(p, st)
	key := client.ObjectKey{Namespace: st.Namespace, Name: st.JobName}
	// live reads past the cache: the API reader here, the target
	// cluster's client (never cached) there.
	live := client.Reader(c)
	if st.Cluster == migrationv1.ClusterLocal {
		live = r.APIReader
	}
	job := &batchv1.Job{}
	err := c.Get(ctx, key, job)
	if apierrors.IsNotFound(err) && st.Created && st.Cluster == migrationv1.ClusterLocal {
		// The cache may lag behind the Job this step created a moment ago:
		// only the API server can say it is gone. (A Job not recorded as
		// created is not read past the cache: the create below finds one
		// that exists, AlreadyExists, and reads it then.)
		err = r.APIReader.Get(ctx, key, job)
	}
	switch {
	case apierrors.IsNotFound(err):
		if st.Created {
			st.Phase = migrationv1.StepFailed
			st.Message = fmt.Sprintf("Job %s/%s was deleted before it finished", st.Namespace, st.JobName)
			now := metav1.Now()
			st.CompletionTime = &now
			return false, r.fail(p, migrationv1.JobDeletedReason, fmt.Sprintf(
				"step %s: Job %s/%s was deleted before it finished; the target may be partly written; create a new MigrationJob to try again", s.step, st.Namespace, st.JobName))
		}
		desired, err := r.desiredJob(mj, spec, st, mj.Status.Artifact)
		if err != nil {
			return false, err
		}
		err = c.Create(ctx, desired)
		if err == nil {
			log.Info("step Job created", "step", s.step, "Job", st.JobName, "namespace", st.Namespace, "cluster", st.Cluster)
			st.Created, st.Phase = true, migrationv1.StepRunning
			now := metav1.Now()
			st.StartTime = &now
			if st.Cluster == migrationv1.ClusterTarget {
				p.RequeueAfter(r.PollInterval)
			}
			return false, nil
		}
		if !apierrors.IsAlreadyExists(err) {
			return false, fmt.Errorf("creating Job %s/%s for step %s: %w", st.Namespace, st.JobName, s.step, err)
		}
		// A Job of this name exists that the cache did not show: created by
		// an earlier pass whose status write was lost, or someone else's.
		// Read it past the cache and go on with it (checked below: never a
		// second Job, never someone else's adopted).
		job = &batchv1.Job{}
		if err := live.Get(ctx, key, job); apierrors.IsNotFound(err) {
			p.RequeueAfter(time.Second) // deleted meanwhile: look again
			return false, nil
		} else if err != nil {
			return false, fmt.Errorf("reading Job %s/%s: %w", st.Namespace, st.JobName, err)
		}
	case err != nil:
		return false, fmt.Errorf("reading Job %s/%s: %w", st.Namespace, st.JobName, err)
	}
	if job.Labels[migrationv1.MigrationJobUIDLabel] != string(mj.UID) {
		nc := &ownership.NotControlledError{Kind: "Job", Key: client.ObjectKeyFromObject(job)}
		return false, reconcile.Stalled(cairnv1.NotControlledReason, "%s (it is not labelled %s=%s)", nc.Error(), migrationv1.MigrationJobUIDLabel, mj.UID)
	}
	st.Created = true
	if st.StartTime == nil {
		t := job.CreationTimestamp
		st.StartTime = &t
	}
	out := agentjob.JobOutcome(job)
	if !out.Finished {
		st.Phase = migrationv1.StepRunning
		if st.Cluster == migrationv1.ClusterTarget {
			p.RequeueAfter(r.PollInterval) // not watched: look again
		}
		return false, nil
	}
	res, failure, perr := r.podResult(ctx, c, job)
	at := metav1.NewTime(out.At)
	if out.At.IsZero() {
		at = metav1.Now()
	}
	if out.Succeeded {
		if res == nil && time.Since(out.At) < resultGrace {
			log.V(1).Info("Job complete; waiting for the agent's report", "Job", job.Name, "error", perr)
			p.RequeueAfter(2 * time.Second)
			return false, nil
		}
		if res != nil {
			st.Actions, st.Warnings = capLines(res.Actions), capLines(res.Warnings)
		}
		if s.onResult != nil {
			if err := s.onResult(res); err != nil {
				st.Phase, st.Message, st.CompletionTime = migrationv1.StepFailed, err.Error(), &at
				return false, r.fail(p, migrationv1.StepFailedReason, fmt.Sprintf("step %s: %v", s.step, err))
			}
		}
		st.Phase, st.CompletionTime = migrationv1.StepSucceeded, &at
		log.Info("step succeeded", "step", s.step, "Job", job.Name)
		return true, nil
	}
	msg := fmt.Sprintf("Job %s/%s failed after %d attempt(s)", st.Namespace, st.JobName, job.Status.Failed)
	if out.Reason != "" {
		msg += ": " + out.Reason
	}
	if failure != "" {
		msg += "; agent: " + failure
	}
	st.Phase, st.Message, st.CompletionTime = migrationv1.StepFailed, msg, &at
	if s.onFailure != nil {
		if err := s.onFailure(failure); err == nil {
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

// podResult reads the agent's report from the termination messages of the
// Job's pods: the newest result, else the newest failure reason.
func (r *MigrationJobReconciler) podResult(ctx context.Context, c client.Reader, job *batchv1.Job) (*contract.MigrationResult, string, error) {
	pods := &corev1.PodList{}
	if err := c.List(ctx, pods, client.InNamespace(job.Namespace), client.MatchingLabels{
		migrationv1.StepLabel: job.Labels[migrationv1.StepLabel], migrationv1.MigrationJobUIDLabel: job.Labels[migrationv1.MigrationJobUIDLabel],
	}); err != nil {
		return nil, "", fmt.Errorf("listing the pods of Job %s: %w", job.Name, err)
	}
	var own []corev1.Pod
	for i := range pods.Items {
		if metav1.IsControlledBy(&pods.Items[i], job) {
			own = append(own, pods.Items[i])
		}
	}
	newest, failed, err := agentjob.NewestResult(own, contract.ParseMigration)
	if err != nil {
		return nil, "", fmt.Errorf("no agent result in the pods of Job %s", job.Name)
	}
	failure := ""
	if failed != nil {
		failure = failed.Error()
		var fe *contract.FailedError
		if errors.As(failed, &fe) {
			failure = fe.Reason
		}
	}
	return newest, failure, nil
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
