package controller

import (
	"context"
	"sort"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	backupv1 "cairn.dev/apis/backup/v1"
	"cairn.dev/libs/agentjob"
	"cairn.dev/libs/ownership"
)

func metaTime(t time.Time) *metav1.Time {
	mt := metav1.NewTime(t.UTC().Truncate(time.Second))
	return &mt
}

// runNow starts one Job per distinct value of the run-now annotation. The Job
// name derives from the value, so a repeated reconcile (or a stale read of the
// status that records the value) never starts a second Job for it.
func (r *BackupJobReconciler) runNow(ctx context.Context, bj *backupv1.BackupJob) error {
	id := bj.Annotations[backupv1.RunNowAnnotation]
	if id == "" || id == bj.Status.LastRunNowRequest {
		return nil
	}
	job := runNowJob(bj, r.AgentImage, id)
	if err := ownership.SetController(bj, job, r.Scheme); err != nil {
		return err
	}
	if err := r.Client.Create(ctx, job); err != nil && !apierrors.IsAlreadyExists(err) {
		return err
	} else if err == nil {
		ctrl.LoggerFrom(ctx).Info("run-now Job created", "Job", job.Name, "request", id)
		r.Recorder.Eventf(bj, job, corev1.EventTypeNormal, "RunNow", "CreateJob", "started Job %s for run-now request %q", job.Name, id)
	}
	bj.Status.LastRunNowRequest = id
	return nil
}

// observeRuns lists the BackupJob's run Jobs and records every run that
// finished since the last one recorded, oldest first, exactly once: the
// status keeps (lastBackupTime, lastRunName) as the high-water mark. It
// reports whether a run is active and, when a finished run's agent result
// has not reached the cache yet, how soon to look again.
func (r *BackupJobReconciler) observeRuns(ctx context.Context, bj *backupv1.BackupJob) (bool, time.Duration, error) {
	jobs := &batchv1.JobList{}
	if err := r.Client.List(ctx, jobs, client.InNamespace(bj.Namespace), client.MatchingLabels{BackupJobLabel: bj.Name}); err != nil {
		return false, 0, err
	}
	type finished struct {
		job     *batchv1.Job
		outcome agentjob.Outcome
	}
	var done []finished
	running := false
	for i := range jobs.Items {
		j := &jobs.Items[i]
		if j.Labels[RunKindLabel] == runDelete {
			continue
		}
		o := agentjob.JobOutcome(j)
		if !o.Finished {
			if j.DeletionTimestamp.IsZero() {
				running = true
			}
			continue
		}
		if recorded(bj, j.Name, o.At) {
			continue
		}
		done = append(done, finished{j, o})
	}
	sort.Slice(done, func(a, b int) bool {
		ta, tb := done[a].outcome.At.Truncate(time.Second), done[b].outcome.At.Truncate(time.Second)
		if !ta.Equal(tb) {
			return ta.Before(tb)
		}
		return done[a].job.Name < done[b].job.Name
	})
	for _, f := range done {
		wait, err := r.recordRun(ctx, bj, f.job, f.outcome)
		if err != nil || wait > 0 {
			return running, wait, err
		}
	}
	return running, 0, nil
}

// recorded reports whether the run (name, finished at) is at or before the
// status' high-water mark.
func recorded(bj *backupv1.BackupJob, name string, at time.Time) bool {
	last := bj.Status.LastBackupTime
	if last == nil {
		return false
	}
	at = at.UTC().Truncate(time.Second)
	if at.Before(last.Time) {
		return true
	}
	return at.Equal(last.Time) && name <= bj.Status.LastRunName
}

// recordRun folds one finished run into the status, emits its Event and
// metrics. A successful run whose pod result is not cached yet waits up to
// ResultGrace for it (the Job controller's update can arrive before the
// kubelet's pod update).
func (r *BackupJobReconciler) recordRun(ctx context.Context, bj *backupv1.BackupJob, job *batchv1.Job, o agentjob.Outcome) (time.Duration, error) {
	log := ctrl.LoggerFrom(ctx).WithValues("Job", job.Name)
	pods := &corev1.PodList{}
	if err := r.Client.List(ctx, pods, client.InNamespace(job.Namespace), client.MatchingLabels{jobNameLabel: job.Name}); err != nil {
		return 0, err
	}
	res, failure, rerr := agentjob.PodResult(pods.Items)
	if o.Succeeded && res == nil {
		if since := r.now().Sub(o.At); since < r.ResultGrace {
			return r.ResultGrace - since, nil
		}
		log.Info("run succeeded without an agent result in its pods; recording it without an artifact", "reason", rerr)
	}

	at := metaTime(o.At)
	bj.Status.LastBackupTime = at
	bj.Status.LastRunName = job.Name
	result := "Succeeded"
	if o.Succeeded {
		bj.Status.LastResult = backupv1.RunSucceeded
		bj.Status.LastSuccessfulTime = at
		bj.Status.ConsecutiveFailures = 0
		if res != nil {
			bj.Status.LastArtifact = agentjob.Artifact(res)
		}
		lastSuccessGauge.WithLabelValues(bj.Namespace, bj.Name).Set(float64(o.At.Unix()))
		msg := "backup run " + job.Name + " succeeded"
		if res != nil {
			msg += ": " + res.Artifact
		}
		afterStatusWrite(ctx, func() {
			r.Recorder.Eventf(bj, job, corev1.EventTypeNormal, "BackupSucceeded", "Backup", "%s", msg)
			log.Info("backup run succeeded")
		})
	} else {
		result = "Failed"
		bj.Status.LastResult = backupv1.RunFailed
		bj.Status.LastFailureTime = at
		bj.Status.ConsecutiveFailures++
		reason := o.Reason
		if failure != "" {
			reason += ": " + failure
		}
		failures := bj.Status.ConsecutiveFailures
		how := "after its retries"
		if o.NotRetried {
			how = "without retries: the agent's exit code says retrying cannot help"
		}
		afterStatusWrite(ctx, func() {
			r.Recorder.Eventf(bj, job, corev1.EventTypeWarning, "BackupFailed", "Backup",
				"backup run %s failed %s (%s); %d consecutive failure(s)", job.Name, how, reason, failures)
			log.Info("backup run failed", "reason", reason, "consecutiveFailures", failures)
		})
	}
	failures := float64(bj.Status.ConsecutiveFailures)
	afterStatusWrite(ctx, func() {
		consecutiveFailuresGauge.WithLabelValues(bj.Namespace, bj.Name).Set(failures)
		runsTotal.WithLabelValues(bj.Namespace, bj.Name, result).Inc()
		if job.Status.StartTime != nil {
			runDuration.WithLabelValues(bj.Namespace, bj.Name, result).Observe(o.At.Sub(job.Status.StartTime.Time).Seconds())
		}
	})
	return 0, nil
}

// A run is recorded once: its Event and metrics follow the status write that
// records it. A write that conflicts (the status was computed from a stale
// read, e.g. of a run another reconcile recorded meanwhile) drops them; the
// next reconcile decides again from fresh status.
type afterWriteKey struct{}

type afterWrite struct{ fns []func() }

// withAfterWrite collects afterStatusWrite's functions for one reconcile.
func withAfterWrite(ctx context.Context) (context.Context, *afterWrite) {
	a := &afterWrite{}
	return context.WithValue(ctx, afterWriteKey{}, a), a
}

// afterStatusWrite runs fn once the reconcile's status write succeeded (at
// once outside a reconcile).
func afterStatusWrite(ctx context.Context, fn func()) {
	if a, ok := ctx.Value(afterWriteKey{}).(*afterWrite); ok {
		a.fns = append(a.fns, fn)
		return
	}
	fn()
}

func (a *afterWrite) run() {
	for _, fn := range a.fns {
		fn()
	}
	a.fns = nil
}
