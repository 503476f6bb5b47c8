package soak

import (
	"context"
	"fmt"
	"strings"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	backupv1 "cairn.dev/apis/backup/v1"
	migrationv1 "cairn.dev/apis/migration/v1"
	platformv1 "cairn.dev/apis/platform/v1"
	restorev1 "cairn.dev/apis/restore/v1"
	"cairn.dev/e2e/dbcheck"
	"cairn.dev/e2e/install"
)

// windowMargin: minutes closer than this to the suspension are not
// counted as due (the CronJob controller starts a run a moment after its
// minute; the suspension may reach it first).
const windowMargin = 30 * time.Second

// settleFor bounds the wait for the runs under way once the faults ended.
const settleFor = 6 * time.Minute

// finish ends the workload: suspends the backups, waits for the runs,
// restores and verification under way, cuts the migration over, samples
// the operators' memory a last time, stops the recorder and fills h.
func (w *workload) finish(ctx context.Context, h *History, rec *recorder, inj *injector, stopRec func()) error {
	c := w.env.Client
	for _, n := range []string{pgBackup, mariaBackup} {
		if err := patchRetry(ctx, c, &backupv1.BackupJob{}, client.ObjectKey{Namespace: w.ns, Name: n}, func(o client.Object) {
			o.(*backupv1.BackupJob).Spec.Suspend = true
		}); err != nil {
			return err
		}
	}
	if err := patchRetry(ctx, c, &platformv1.ProtectionPlan{}, client.ObjectKey{Namespace: w.ns, Name: planName}, func(o client.Object) {
		o.(*platformv1.ProtectionPlan).Spec.Backup.Suspend = true
	}); err != nil {
		return err
	}
	suspended := time.Now()
	for _, n := range []string{pgBackup, mariaBackup, planName} {
		cj := &batchv1.CronJob{}
		if err := c.Get(ctx, client.ObjectKey{Namespace: w.ns, Name: n}, cj); err != nil {
			return fmt.Errorf("soak: CronJob %s: %w", n, err)
		}
		h.Windows = append(h.Windows, ScheduleWindow{BackupJob: n, From: cj.CreationTimestamp.Time, To: suspended.Add(-windowMargin)})
	}
	w.logf("suspended the backups at %s; waiting up to %s for the runs, restores and verification under way", clock(suspended), settleFor)
	deadline := time.Now().Add(settleFor)
	for {
		w.comparePending(ctx)
		plan := &platformv1.ProtectionPlan{}
		verifying := c.Get(ctx, client.ObjectKey{Namespace: w.ns, Name: planName}, plan) != nil ||
			(plan.Status.LastVerification != nil && !finishedVerification(plan.Status.LastVerification.Result))
		active, pending := rec.active(), w.pendingRestores()
		unreported, err := rec.unreported(ctx)
		if err != nil {
			unreported = -1 // the API server restarting: look again
		}
		if active == 0 && pending == 0 && unreported == 0 && !verifying {
			break
		}
		if time.Now().After(deadline) {
			w.logf("still under way after %s: %d Job(s), %d finished backup run(s) not reported, %d RestoreJob(s) to compare, verification running %v",
				settleFor, active, unreported, pending, verifying)
			break
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(2 * time.Second):
		}
	}
	var err error
	if h.Migration, err = w.cutOver(ctx); err != nil {
		return err
	}
	if s, err := sampleRSS(ctx, w.env, install.OperatorNames(w.env.Manifests)); err == nil {
		h.RSS = append(h.RSS, s...)
	}
	stopRec()
	rec.poll(ctx)
	if h.Events, err = rec.events(ctx); err != nil {
		return fmt.Errorf("soak: listing Events: %w", err)
	}
	inj.mu.Lock()
	defer inj.mu.Unlock()
	rec.snapshot(h, inj.killed)
	return nil
}

func finishedVerification(r platformv1.VerificationResult) bool {
	return r == platformv1.VerificationSucceeded || r == platformv1.VerificationFailed
}

// cutOver stops the write load, approves the MigrationJob's cutover (the
// writers declared stopped), waits for it to end and compares its target
// with its source.
func (w *workload) cutOver(ctx context.Context) (*MigrationRecord, error) {
	stats := w.load.Stop()
	m := &MigrationRecord{Name: migrationName, Load: stats.String()}
	if stats.Errors > 0 {
		m.Load += " (first error: " + w.load.FirstError() + ")"
	}
	c := w.env.Client
	key := client.ObjectKey{Namespace: w.ns, Name: migrationName}
	if err := patchRetry(ctx, c, &migrationv1.MigrationJob{}, key, func(o client.Object) {
		mj := o.(*migrationv1.MigrationJob)
		mj.Spec.Cutover.Approved, mj.Spec.Cutover.WritersStopped = true, true
	}); err != nil {
		return nil, err
	}
	w.logf("approved the cutover of MigrationJob %s (the load stopped: %s)", migrationName, stats)
	mj := &migrationv1.MigrationJob{}
	deadline := time.Now().Add(settleFor)
	for {
		if err := c.Get(ctx, key, mj); err == nil && mj.Finished() {
			break
		}
		if time.Now().After(deadline) {
			break
		}
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-time.After(2 * time.Second):
		}
	}
	m.Phase = string(mj.Status.Phase)
	if mj.Status.Phase != migrationv1.PhaseSucceeded {
		for _, cond := range mj.Status.Conditions {
			if cond.Status != "True" || cond.Type == "Stalled" {
				m.Phase += fmt.Sprintf(" [%s=%s %s: %s]", cond.Type, cond.Status, cond.Reason, cond.Message)
			}
		}
		return m, nil
	}
	pg := w.env.Servers.Postgres
	src, err := dbcheck.PostgresTables(pg, LiveDB)
	if err != nil {
		return nil, err
	}
	dst, err := dbcheck.PostgresTables(pg, LiveTarget)
	if err != nil {
		return nil, err
	}
	m.Compared, m.Differences = true, differences(src, dst)
	w.logf("MigrationJob %s %s: %d tables compared, %d differ", migrationName, m.Phase, len(src), len(m.Differences))
	return m, nil
}

// tearDown deletes the MigrationJob and checks that its replication
// objects are gone from the server, then deletes every other object of the
// workload and records what is still Terminating after the deadline.
func (w *workload) tearDown(ctx context.Context, h *History) error {
	c := w.env.Client
	mj := &migrationv1.MigrationJob{}
	mj.Namespace, mj.Name = w.ns, migrationName
	if err := c.Delete(ctx, mj); client.IgnoreNotFound(err) != nil {
		return err
	}
	gone := waitGone(ctx, c, mj, 3*time.Minute)
	if h.Migration != nil {
		h.Migration.Deleted = gone
		pg := w.env.Servers.Postgres
		for _, q := range []struct{ what, db, sql string }{
			{"replication slot", "postgres", "SELECT slot_name FROM pg_replication_slots"},
			{"publication", LiveDB, "SELECT pubname FROM pg_publication"},
			{"subscription", "postgres", "SELECT subname FROM pg_subscription"},
		} {
			out, err := pg.SQL(q.db, q.sql)
			if err != nil {
				return fmt.Errorf("soak: listing %ss: %w", q.what, err)
			}
			for _, n := range strings.Fields(out) {
				h.Migration.Left = append(h.Migration.Left, q.what+" "+n)
			}
		}
	}
	start := time.Now()
	for _, o := range []client.Object{&backupv1.BackupJob{}, &restorev1.RestoreJob{}, &platformv1.ProtectionPlan{}} {
		if err := c.DeleteAllOf(ctx, o, client.InNamespace(w.ns)); err != nil {
			return fmt.Errorf("soak: deleting %T: %w", o, err)
		}
	}
	deadline := start.Add(3 * time.Minute)
	for {
		left, err := terminating(ctx, c, w.ns)
		if err == nil && len(left) == 0 {
			w.logf("every object of the workload gone %s after its deletion", time.Since(start).Round(100*time.Millisecond))
			return nil
		}
		if time.Now().After(deadline) {
			h.Terminating = left
			return nil
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(time.Second):
		}
	}
}

// terminating lists the namespace's Cairn objects (every one was deleted)
// and its CronJobs, Jobs and pods being deleted.
func terminating(ctx context.Context, c client.Client, ns string) ([]Terminating, error) {
	var out []Terminating
	for _, l := range []struct {
		kind  string
		list  client.ObjectList
		cairn bool
	}{{"BackupJob", &backupv1.BackupJobList{}, true}, {"RestoreJob", &restorev1.RestoreJobList{}, true},
		{"ProtectionPlan", &platformv1.ProtectionPlanList{}, true}, {"MigrationJob", &migrationv1.MigrationJobList{}, true},
		{"CronJob", &batchv1.CronJobList{}, false}, {"Job", &batchv1.JobList{}, false}, {"Pod", &corev1.PodList{}, false}} {
		if err := c.List(ctx, l.list, client.InNamespace(ns)); err != nil {
			return nil, err
		}
		if err := meta.EachListItem(l.list, func(o runtime.Object) error {
			m, err := meta.Accessor(o)
			if err != nil {
				return err
			}
			if dt := m.GetDeletionTimestamp(); dt != nil {
				out = append(out, Terminating{Kind: l.kind, Namespace: ns, Name: m.GetName(), Since: dt.Time})
			} else if l.cairn {
				out = append(out, Terminating{Kind: l.kind + " (not even deleting)", Namespace: ns, Name: m.GetName()})
			}
			return nil
		}); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// waitGone waits until o is not found.
func waitGone(ctx context.Context, c client.Client, o client.Object, timeout time.Duration) bool {
	deadline := time.Now().Add(timeout)
	for time.Now().Before(deadline) {
		if err := c.Get(ctx, client.ObjectKeyFromObject(o), o); apierrors.IsNotFound(err) {
			return true
		}
		select {
		case <-ctx.Done():
			return false
		case <-time.After(time.Second):
		}
	}
	return false
}

// patchRetry reads the object at key into o, changes it and updates it,
// again on a conflict or while the API server is away (up to a minute).
func patchRetry(ctx context.Context, c client.Client, o client.Object, key client.ObjectKey, change func(client.Object)) error {
	deadline := time.Now().Add(time.Minute)
	for {
		err := c.Get(ctx, key, o)
		if err == nil {
			change(o)
			if err = c.Update(ctx, o); err == nil {
				return nil
			}
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("soak: updating %T %s: %w", o, key, err)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(500 * time.Millisecond):
		}
	}
}
