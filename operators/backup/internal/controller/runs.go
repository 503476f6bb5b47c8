package controller

import (
	"context"
	"fmt"
	"slices"
	"sort"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/events"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"cairn.dev/agent/contract"
	backupv1 "cairn.dev/apis/backup/v1"
	"cairn.dev/libs/agentjob"
	"cairn.dev/libs/ownership"
)

// state is what the BackupJob's steps share within one pass.
type state struct {
	// runs are the BackupJob's run Jobs (scheduled and run-now; not the
	// artifact delete Job), recognised by their controller: the BackupJob
	// or its CronJob.
	runs []batchv1.Job
	// active: a run has not finished yet.
	active bool
	// archiver is the archiver Deployment as the archiver step saw it
	// (nil: point-in-time off, or the step did not get that far).
	archiver *appsv1.Deployment
}

// runNowHistory is how many finished, recorded run-now Jobs are kept (like
// the CronJob's successful/failed history limits); older ones are deleted.
const runNowHistory = 3

// maxRunsAtLastBackupTime bounds status.runsAtLastBackupTime (the CRD's
// maxItems): far more runs than the Job history keeps end in one second.
const maxRunsAtLastBackupTime = 64

func metaTime(t time.Time) *metav1.Time {
	mt := metav1.NewTime(t.UTC().Truncate(time.Second))
	return &mt
}

func runActive(p *pass) bool { return p.State.active }

// runNow starts one Job per distinct value of the run-now annotation: not
// while the BackupJob is suspended (the request waits for spec.suspend to be
// false, as the webhook's warning says) and not while another run is active
// (it starts when that run finished: two runs of one BackupJob never
// overlap). The Job name derives from the value, so a repeated reconcile (or
// a stale read of the status that records the value) never starts a second
// Job for it.
func (r *BackupJobReconciler) runNow(ctx context.Context, p *pass) error {
	bj := p.Obj
	id := bj.Annotations[backupv1.RunNowAnnotation]
	if id == "" || id == bj.Status.LastRunNowRequest || bj.Spec.Suspend || p.State.active {
		return nil
	}
	job := runNowJob(bj, r.imageFor(bj), id)
	run := ownRun(r, bj, job, contract.Parse)
	if _, err := run.Observe(ctx); err != nil {
		return fmt.Errorf("run-now Job %s: %w", job.Name, err)
	}
	bj.Status.LastRunNowRequest = id
	p.State.active = true
	return nil
}

// observeRuns lists the BackupJob's run Jobs and records every run that
// finished since the last one recorded, oldest first, exactly once: the
// status keeps (lastBackupTime, lastRunName) as the high-water mark. Each
// recorded run is stored (a checkpoint) before the next is recorded, so each
// one's Event and metrics follow from its own status change. When a
// finished run's agent result has not reached the cache yet, it looks again
// soon.
func (r *BackupJobReconciler) observeRuns(ctx context.Context, p *pass) error {
	bj := p.Obj
	runs, err := r.listRuns(ctx, bj)
	if err != nil {
		return err
	}
	p.State.runs = runs
	type finished struct {
		job     *batchv1.Job
		outcome agentjob.Outcome
	}
	var done []finished
	for i := range runs {
		j := &runs[i]
		o := agentjob.JobOutcome(j)
		if !o.Finished {
			if j.DeletionTimestamp.IsZero() {
				p.State.active = true
			}
			continue
		}
		if !recorded(bj, j.Name, o.At) {
			done = append(done, finished{j, o})
		}
	}
	sort.Slice(done, func(a, b int) bool {
		ta, tb := done[a].outcome.At.Truncate(time.Second), done[b].outcome.At.Truncate(time.Second)
		if !ta.Equal(tb) {
			return ta.Before(tb)
		}
		return done[a].job.Name < done[b].job.Name
	})
	for i, f := range done {
		if i > 0 {
			if err := p.Checkpoint(ctx); err != nil {
				return err
			}
		}
		wait, err := r.recordRun(ctx, bj, f.job, f.outcome)
		if err != nil {
			return err
		}
		if wait > 0 {
			p.RequeueAfter(wait)
			break
		}
	}
	if err := r.pruneRunNowJobs(ctx, bj, runs); err != nil {
		return err
	}
	if err := r.rerunWithServingImage(ctx, p); err != nil {
		return err
	}
	if r.clearStaleUnsupported(bj); bj.Status.UnsupportedServer != nil {
		return r.stallUnsupported(ctx, bj)
	}
	return nil
}

// listRuns returns the Jobs that are runs of bj: labelled with its name and
// controlled by bj (run-now) or by bj's CronJob (scheduled). A Job that only
// carries the label is not a run of bj.
func (r *BackupJobReconciler) listRuns(ctx context.Context, bj *backupv1.BackupJob) ([]batchv1.Job, error) {
	jobs := &batchv1.JobList{}
	if err := r.Client.List(ctx, jobs, client.InNamespace(bj.Namespace), client.MatchingLabels{BackupJobLabel: bj.Name}); err != nil {
		return nil, err
	}
	var cronJobUID types.UID
	cj := cronJobMeta()
	if err := r.Client.Get(ctx, client.ObjectKey{Namespace: bj.Namespace, Name: bj.Name}, cj); err == nil && metav1.IsControlledBy(cj, bj) {
		cronJobUID = cj.UID
	}
	var runs []batchv1.Job
	for _, j := range jobs.Items {
		if kind := j.Labels[RunKindLabel]; kind == runDelete || kind == runList || kind == runCheck {
			continue
		}
		ref := metav1.GetControllerOf(&j)
		if ref == nil {
			continue
		}
		// Once the CronJob is gone (deletion), its Jobs still name it.
		formerCronJob := cronJobUID == "" && ref.Kind == "CronJob" && ref.Name == bj.Name
		if ref.UID == bj.UID || (cronJobUID != "" && ref.UID == cronJobUID) || formerCronJob {
			runs = append(runs, j)
		}
	}
	return runs, nil
}

// pruneRunNowJobs deletes finished, recorded run-now Jobs beyond the newest
// runNowHistory (the CronJob keeps its own Jobs' history).
func (r *BackupJobReconciler) pruneRunNowJobs(ctx context.Context, bj *backupv1.BackupJob, runs []batchv1.Job) error {
	var old []*batchv1.Job
	for i := range runs {
		j := &runs[i]
		o := agentjob.JobOutcome(j)
		if j.Labels[RunKindLabel] == runNow && o.Finished && j.DeletionTimestamp.IsZero() && recorded(bj, j.Name, o.At) {
			old = append(old, j)
		}
	}
	if len(old) <= runNowHistory {
		return nil
	}
	sort.Slice(old, func(a, b int) bool { return agentjob.JobOutcome(old[a]).At.After(agentjob.JobOutcome(old[b]).At) })
	for _, j := range old[runNowHistory:] {
		err := r.Client.Delete(ctx, j, client.PropagationPolicy(metav1.DeletePropagationBackground), client.Preconditions{UID: &j.UID})
		if client.IgnoreNotFound(err) != nil {
			return fmt.Errorf("deleting old run-now Job %s: %w", j.Name, err)
		}
	}
	return nil
}

// recorded reports whether the run (name, finished at) is before the
// status' high-water mark, or in its second and named there. Job times
// have a one-second resolution, so two runs can end in the same second and
// be seen one pass apart (a run-now and a scheduled run): the second one
// is recorded too. A status written before runsAtLastBackupTime existed
// falls back to the name order it used.
func recorded(bj *backupv1.BackupJob, name string, at time.Time) bool {
	last := bj.Status.LastBackupTime
	if last == nil {
		return false
	}
	at = at.UTC().Truncate(time.Second)
	if at.Before(last.Time) {
		return true
	}
	if !at.Equal(last.Time) {
		return false
	}
	if same := bj.Status.RunsAtLastBackupTime; len(same) > 0 {
		return slices.Contains(same, name)
	}
	return name <= bj.Status.LastRunName
}

// recordRun folds one finished run into the status. A successful run whose
// pod result is not cached yet waits up to ResultGrace for it
// (agentjob.Read: the Job controller's update can arrive before the
// kubelet's pod update).
func (r *BackupJobReconciler) recordRun(ctx context.Context, bj *backupv1.BackupJob, job *batchv1.Job, o agentjob.Outcome) (time.Duration, error) {
	log := ctrl.LoggerFrom(ctx).WithValues("Job", job.Name)
	obs, err := agentjob.Read(ctx, r.Client, job, contract.Parse, r.ResultGrace, r.Now())
	if err != nil {
		return 0, err
	}
	if obs.State == agentjob.RunPending {
		return obs.RequeueAfter, nil
	}
	res, failure := obs.Result, obs.FailureReason()
	r.recordUnsupported(bj, job, obs.Failure)
	if srv := runServer(res, obs.Failure); srv != nil {
		bj.Status.Server = srv
	}
	if o.Succeeded && res == nil {
		log.Info("run succeeded without an agent result in its pods; recording it without an artifact")
	}

	at := metaTime(o.At)
	if prev := bj.Status.LastBackupTime; prev != nil && prev.Equal(at) {
		bj.Status.RunsAtLastBackupTime = append(bj.Status.RunsAtLastBackupTime, job.Name)
		if n := len(bj.Status.RunsAtLastBackupTime); n > maxRunsAtLastBackupTime {
			bj.Status.RunsAtLastBackupTime = bj.Status.RunsAtLastBackupTime[n-maxRunsAtLastBackupTime:]
		}
	} else {
		bj.Status.RunsAtLastBackupTime = []string{job.Name}
	}
	bj.Status.LastBackupTime = at
	bj.Status.LastRunName = job.Name
	bj.Status.LastRunStartTime = nil
	if job.Status.StartTime != nil {
		bj.Status.LastRunStartTime = metaTime(job.Status.StartTime.Time)
	}
	if o.Succeeded {
		bj.Status.LastResult = backupv1.RunSucceeded
		bj.Status.LastSuccessfulTime = at
		bj.Status.ConsecutiveFailures = 0
		msg := "backup run " + job.Name + " succeeded"
		if res != nil {
			bj.Status.LastArtifact = agentjob.Artifact(res)
			bj.Status.Retention = retentionStatus(res, at)
			recordWindow(bj, res.PointInTime, at)
			msg += ": " + res.Artifact
		}
		bj.Status.LastRunMessage = msg
		log.Info("backup run succeeded")
		return 0, nil
	}
	bj.Status.LastResult = backupv1.RunFailed
	bj.Status.LastFailureTime = at
	bj.Status.ConsecutiveFailures++
	reason := o.Reason
	if failure != "" {
		reason += ": " + failure
	}
	how := "after its retries"
	if o.NotRetried {
		how = "without retries: the agent's exit code says retrying cannot help"
	}
	bj.Status.LastRunMessage = fmt.Sprintf("backup run %s failed %s (%s)", job.Name, how, reason)
	log.Info("backup run failed", "reason", reason, "consecutiveFailures", bj.Status.ConsecutiveFailures)
	return 0, nil
}

// transition emits the BackupJob's own Events and counts its runs for a
// status change that was just stored: a run-now Job started, a run
// recorded. Derived from old → new status only, so a pass whose write
// conflicted emits nothing and each run is counted once.
func (r *BackupJobReconciler) transition(_ context.Context, rec events.EventRecorder, old, bj *backupv1.BackupJob) {
	if id := bj.Status.LastRunNowRequest; id != "" && id != old.Status.LastRunNowRequest {
		job := runNowJob(bj, "", id)
		rec.Eventf(bj, jobRef(job.Namespace, job.Name), corev1.EventTypeNormal, "RunNow", "CreateJob",
			"started Job %s for run-now request %q", job.Name, id)
	}
	st := bj.Status
	if st.LastBackupTime == nil || (old.Status.LastBackupTime.Equal(st.LastBackupTime) && old.Status.LastRunName == st.LastRunName) {
		return
	}
	result := string(st.LastResult)
	related := jobRef(bj.Namespace, st.LastRunName)
	if st.LastResult == backupv1.RunSucceeded {
		rec.Eventf(bj, related, corev1.EventTypeNormal, "BackupSucceeded", "Backup", "%s", st.LastRunMessage)
	} else {
		rec.Eventf(bj, related, corev1.EventTypeWarning, "BackupFailed", "Backup",
			"%s; %d consecutive failure(s)", st.LastRunMessage, st.ConsecutiveFailures)
	}
	metrics.Runs.WithLabelValues(bj.Namespace, bj.Name, result).Inc()
	if st.LastRunStartTime != nil {
		metrics.RunDuration.WithLabelValues(bj.Namespace, bj.Name, result).Observe(st.LastBackupTime.Sub(st.LastRunStartTime.Time).Seconds())
	}
}

// jobRef is the related object of a run's Event.
func jobRef(namespace, name string) *batchv1.Job {
	j := &batchv1.Job{ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name}}
	j.SetGroupVersionKind(batchv1.SchemeGroupVersion.WithKind("Job"))
	return j
}

// ownRun is an agent Job of bj's that is found by its name alone (run-now,
// catalog listing, archive check, slot release: the name derives from the
// request or a stored count), created with bj as its controller, never
// adopted otherwise; parse reads its pod's report.
func ownRun[R any](r *BackupJobReconciler, bj *backupv1.BackupJob, job *batchv1.Job, parse func(string) (*R, error)) *agentjob.Run[R] {
	return &agentjob.Run[R]{
		Namespace: job.Namespace, Name: job.Name, Client: r.Client, Live: r.APIReader,
		Render: func() (*batchv1.Job, error) { return job, ownership.SetController(bj, job, r.Scheme) },
		Ours:   func(j *batchv1.Job) bool { return metav1.IsControlledBy(j, bj) },
		Parse:  parse, Grace: r.ResultGrace, Now: r.Now,
	}
}

// recordWindow records the archive's window a point-in-time backup read.
func recordWindow(bj *backupv1.BackupJob, w *contract.PointInTimeWindow, at *metav1.Time) {
	if w == nil || bj.Spec.PointInTime == nil {
		return
	}
	st := bj.Status.PointInTime
	if st == nil {
		st = &backupv1.PointInTimeStatus{Archiver: bj.ArchiverName()}
		bj.Status.PointInTime = st
	}
	st.Earliest, st.Latest = optTime(w.Earliest), optTime(w.Latest)
	st.LastSegment, st.Segments = w.LastSegment, int32(w.Segments)
	st.Gaps = w.Gaps
	if len(st.Gaps) > 16 {
		st.Gaps = st.Gaps[:16]
	}
	st.ReadTime = at
}

func optTime(t time.Time) *metav1.Time {
	if t.IsZero() {
		return nil
	}
	return &metav1.Time{Time: t.UTC()}
}
