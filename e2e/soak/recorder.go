package soak

import (
	"context"
	"sync"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	backupv1 "cairn.dev/apis/backup/v1"
	migrationv1 "cairn.dev/apis/migration/v1"
	platformv1 "cairn.dev/apis/platform/v1"
	restorev1 "cairn.dev/apis/restore/v1"
	"cairn.dev/e2e/install"
	"cairn.dev/libs/agentjob"
	"cairn.dev/libs/conditions"
)

// scheduledAnnotation is the CronJob controller's scheduled time of a Job.
const scheduledAnnotation = "batch.kubernetes.io/cronjob-scheduled-timestamp"

// jobNameLabel names a pod's Job.
const jobNameLabel = "batch.kubernetes.io/job-name"

// recorder polls the soak's namespace every interval and keeps what it
// saw: every Job by UID (from its creation to its end, though the CronJob's
// history limit and the operators' pruning delete finished Jobs after a few
// minutes), the agent result of each succeeded backup, every RestoreJob's
// last phase, and the operators' containers that ended. A poll that fails
// (the API server or etcd restarting) is counted and skipped.
type recorder struct {
	c         client.Client
	namespace string

	mu       sync.Mutex
	jobs     map[string]*JobRecord
	restores map[string]*RestoreRecord
	exits    map[string]OperatorExit // by pod name
	polls    int
	failed   int
}

func newRecorder(c client.Client, namespace string) *recorder {
	return &recorder{c: c, namespace: namespace, jobs: map[string]*JobRecord{},
		restores: map[string]*RestoreRecord{}, exits: map[string]OperatorExit{}}
}

// run polls until ctx ends.
func (r *recorder) run(ctx context.Context, every time.Duration) {
	for {
		r.poll(ctx)
		select {
		case <-ctx.Done():
			return
		case <-time.After(every):
		}
	}
}

func (r *recorder) poll(ctx context.Context) {
	ctx, cancel := context.WithTimeout(ctx, 20*time.Second)
	defer cancel()
	jobs := &batchv1.JobList{}
	pods := &corev1.PodList{}
	rjs := &restorev1.RestoreJobList{}
	ops := &corev1.PodList{}
	err := r.c.List(ctx, jobs, client.InNamespace(r.namespace))
	if err == nil {
		err = r.c.List(ctx, pods, client.InNamespace(r.namespace))
	}
	if err == nil {
		err = r.c.List(ctx, rjs, client.InNamespace(r.namespace))
	}
	if err == nil {
		err = r.c.List(ctx, ops, client.InNamespace(install.Namespace))
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	r.polls++
	if err != nil {
		r.failed++
		return
	}
	podsOf := map[string][]corev1.Pod{}
	for _, p := range pods.Items {
		if n := p.Labels[jobNameLabel]; n != "" {
			podsOf[n] = append(podsOf[n], p)
		}
	}
	seen := map[string]bool{}
	for i := range jobs.Items {
		seen[string(jobs.Items[i].UID)] = true
		r.job(&jobs.Items[i], podsOf[jobs.Items[i].Name])
	}
	for uid, j := range r.jobs {
		if !seen[uid] && j.Finished.IsZero() {
			j.Vanished = true
		}
	}
	for i := range rjs.Items {
		r.restore(&rjs.Items[i])
	}
	for _, p := range ops.Items {
		r.operatorPod(&p)
	}
}

func (r *recorder) job(j *batchv1.Job, pods []corev1.Pod) {
	rec := r.jobs[string(j.UID)]
	if rec == nil {
		rec = &JobRecord{UID: string(j.UID), Name: j.Name, Created: j.CreationTimestamp.Time}
		switch {
		case j.Labels[backupv1.BackupJobLabel] != "":
			rec.Kind, rec.Owner, rec.RunKind = KindBackup, j.Labels[backupv1.BackupJobLabel], j.Labels[backupv1.RunKindLabel]
		case j.Labels[restorev1.RestoreJobLabel] != "":
			rec.Kind, rec.Owner = KindRestore, j.Labels[restorev1.RestoreJobLabel]
		case j.Labels[migrationv1.MigrationJobLabel] != "":
			rec.Kind, rec.Owner = KindMigration, j.Labels[migrationv1.MigrationJobLabel]
		default:
			rec.Kind = "other"
		}
		if ts := j.Annotations[scheduledAnnotation]; ts != "" {
			rec.Scheduled, _ = time.Parse(time.RFC3339, ts)
		}
		r.jobs[rec.UID] = rec
	}
	if o := agentjob.JobOutcome(j); o.Finished && rec.Finished.IsZero() {
		rec.Finished, rec.Succeeded = o.At, o.Succeeded
	}
	failed := 0
	for _, p := range pods {
		if p.Status.Phase == corev1.PodFailed {
			failed++
		}
	}
	rec.FailedPods = max(rec.FailedPods, failed)
	if rec.Kind == KindBackup && rec.Succeeded && rec.Result == nil {
		if res, _, err := agentjob.PodResult(pods); err == nil && res != nil {
			rec.Result = res
		}
	}
}

func (r *recorder) restore(rj *restorev1.RestoreJob) {
	rec := r.restores[rj.Name]
	if rec == nil {
		rec = &RestoreRecord{Name: rj.Name, Engine: string(rj.Spec.Target.Engine), Verification: rj.Labels[platformv1.PlanLabel] != ""}
		r.restores[rj.Name] = rec
	}
	rec.Phase = string(rj.Status.Phase)
	if a := rj.Status.Artifact; a != nil {
		rec.Artifact = a.Path
	}
	if c := conditions.Get(rj, "Ready"); c != nil && rj.Status.Phase == restorev1.PhaseFailed {
		rec.Message = c.Message
	}
}

// operatorPod records a manager container that ended, the first time it is
// seen ended.
func (r *recorder) operatorPod(p *corev1.Pod) {
	if _, ok := r.exits[p.Name]; ok {
		return
	}
	for _, cs := range p.Status.ContainerStatuses {
		if t := cs.State.Terminated; cs.Name == "manager" && t != nil {
			r.exits[p.Name] = OperatorExit{Pod: p.Name, Reason: t.Reason, ExitCode: t.ExitCode, At: t.FinishedAt.Time}
		}
	}
}

// compared records the soak's comparison of a RestoreJob's target.
func (r *recorder) compared(name string, differences []string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	rec := r.restores[name]
	if rec == nil {
		rec = &RestoreRecord{Name: name}
		r.restores[name] = rec
	}
	rec.Compared, rec.Differences = true, differences
}

// counts returns how many polls ran and how many failed.
func (r *recorder) counts() (int, int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.polls, r.failed
}

// active counts the backup and restore Jobs not finished yet.
func (r *recorder) active() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	n := 0
	for _, j := range r.jobs {
		if j.Finished.IsZero() && !j.Vanished && (j.Kind == KindBackup || j.Kind == KindRestore) {
			n++
		}
	}
	return n
}

// unreported counts the backup runs that finished but whose report Event
// the operator has not written yet (it waits a result grace after the Job
// ends): the soak waits for them before it judges, so a report that
// arrives a moment late is not counted as lost, and one that never comes
// still is when the wait ends.
func (r *recorder) unreported(ctx context.Context) (int, error) {
	events, err := r.events(ctx)
	if err != nil {
		return 0, err
	}
	reports := runReports(events)
	r.mu.Lock()
	defer r.mu.Unlock()
	n := 0
	for _, j := range r.jobs {
		if j.reportable() && !j.Finished.IsZero() && len(reports[j.Owner+"/"+j.Name]) == 0 {
			n++
		}
	}
	return n, nil
}

// events lists the Events about the soak's objects.
func (r *recorder) events(ctx context.Context) ([]EventRecord, error) {
	l := &eventsv1.EventList{}
	if err := r.c.List(ctx, l, client.InNamespace(r.namespace)); err != nil {
		return nil, err
	}
	var out []EventRecord
	for _, e := range l.Items {
		rec := EventRecord{UID: string(e.UID), Regarding: e.Regarding.Name, Reason: e.Reason, Note: e.Note, Count: 1}
		if e.Related != nil {
			rec.Related = e.Related.Name
		}
		if e.Series != nil && e.Series.Count > 1 {
			rec.Count = int(e.Series.Count)
		}
		if e.DeprecatedCount > 1 {
			rec.Count = max(rec.Count, int(e.DeprecatedCount))
		}
		out = append(out, rec)
	}
	return out, nil
}

// snapshot copies what was recorded into h, leaving out the operator
// containers the soak killed itself.
func (r *recorder) snapshot(h *History, killed map[string]bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	h.Jobs = h.Jobs[:0]
	for _, j := range r.jobs {
		h.Jobs = append(h.Jobs, *j)
	}
	h.Restores = h.Restores[:0]
	for _, rj := range r.restores {
		h.Restores = append(h.Restores, *rj)
	}
	h.Exits = h.Exits[:0]
	for _, e := range r.exits {
		if !killed[e.Pod] {
			h.Exits = append(h.Exits, e)
		}
	}
}
