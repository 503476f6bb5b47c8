package main

import (
	"context"
	"fmt"
	"strings"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/wait"
	"sigs.k8s.io/controller-runtime/pkg/client"

	backupv1 "cairn.dev/apis/backup/v1"
	cairnv1 "cairn.dev/apis/meta/v1"
	migrationv1 "cairn.dev/apis/migration/v1"
	restorev1 "cairn.dev/apis/restore/v1"
	"cairn.dev/libs/conditions"
)

// demoMaxSegmentAge replaces the point-in-time sample's maxSegmentAge (1m,
// the recovery point objective while the archiver runs) in the demo: the
// least the API allows, so that the demo's writes are archived within
// seconds of being made rather than within a minute. A demo setting, not a
// recommendation: each closed segment is a 16 MB WAL file on the server.
const demoMaxSegmentAge = "10s"

// The orders the point-in-time step writes to the source after the base:
// A, then B, then A deleted.
const (
	pitrOrderA = 9000101
	pitrOrderB = 9000102
)

// pitrRestoreDeadline bounds how long the step asks again for a restore the
// agent refused because the time asked for was not archived yet (the
// segment holding it closes within maxSegmentAge, then it is stored).
const pitrRestoreDeadline = 2 * time.Minute

// runPointInTime shows point-in-time recovery on the sample BackupJob with
// spec.pointInTime (PostgreSQL, the orders database): it waits for
// PointInTimeReady (its archiver, applied with the samples, streams the
// write-ahead log into the store), asks for a base backup (run-now), waits
// until the MigrationJob — which copies the same database — has verified
// its copy (so that the writes come after its verification, like the late
// order: cutover copies them), then writes order A (t1), order B (t2) and
// deletes A (t3), applies the sample RestoreJob with spec.source.pointInTime
// set to the second between t2 and t3 into its new database, and prints the
// rows of the source now and of the restored database side by side, and the
// RestoreJob's status.recoveryPoint.
func runPointInTime(ctx context.Context, c client.Client, pl *planeState, s *samples, timeout time.Duration) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	p := s.pitr
	if p.engine() != "postgres" {
		return fmt.Errorf("the point-in-time sample %s is not PostgreSQL: the demo writes its rows with SQL of PostgreSQL", p.backup.GetName())
	}
	pg := pl.Postgres
	key := client.ObjectKeyFromObject(p.backup)
	bj := &backupv1.BackupJob{}
	poll := func(what string, done func() (bool, error)) error {
		err := wait.PollUntilContextCancel(ctx, time.Second, true, func(context.Context) (bool, error) { return done() })
		if err != nil {
			return fmt.Errorf("waiting for %s: %w", what, err)
		}
		return nil
	}

	// 1. The archiver is up and has caught up.
	var ready *metav1.Condition
	if err := poll("backupjob/"+key.Name+" PointInTimeReady", func() (bool, error) {
		if err := c.Get(ctx, key, bj); err != nil {
			return false, err
		}
		ready = conditions.Get(bj, backupv1.PointInTimeReadyCondition)
		return ready != nil && ready.Status == metav1.ConditionTrue, nil
	}); err != nil {
		if ready != nil {
			err = fmt.Errorf("%w (last: %s %s: %s)", err, ready.Status, ready.Reason, ready.Message)
		}
		return err
	}
	fmt.Printf("\nPoint-in-time recovery on %s (127.0.0.1:%d), backupjob/%s (database %s, spec.pointInTime.maxSegmentAge %s):\n",
		"PostgreSQL 15", pg.Port, bj.Name, bj.Spec.Database.Database, demoMaxSegmentAge)
	fmt.Printf("  %s %s %s: %s (deployment/%s)\n", backupv1.PointInTimeReadyCondition, ready.Status, ready.Reason, ready.Message, bj.ArchiverName())

	// 2. A base backup, asked for now (its schedule is nightly).
	runNow := "demo-pitr-" + fmt.Sprint(time.Now().Unix())
	requested := time.Now().Truncate(time.Second)
	patch := client.MergeFrom(bj.DeepCopy())
	if bj.Annotations == nil {
		bj.Annotations = map[string]string{}
	}
	bj.Annotations[backupv1.RunNowAnnotation] = runNow
	if err := c.Patch(ctx, bj, patch); err != nil {
		return fmt.Errorf("asking backupjob/%s for a base: %w", key.Name, err)
	}
	if err := poll("backupjob/"+key.Name+"'s base backup", func() (bool, error) {
		if err := c.Get(ctx, key, bj); err != nil {
			return false, err
		}
		st := bj.Status
		if st.LastRunNowRequest != runNow || st.LastRunStartTime == nil || st.LastRunStartTime.Time.Before(requested) {
			return false, nil
		}
		if st.LastResult == backupv1.RunFailed {
			return false, fmt.Errorf("backupjob/%s's base backup failed: %s", key.Name, st.LastRunMessage)
		}
		return st.LastResult == backupv1.RunSucceeded && st.LastArtifact != nil, nil
	}); err != nil {
		return err
	}
	base := bj.Status.LastArtifact
	fmt.Printf("  base      %s, %d bytes, backed up %s (%s=%s)\n", base.Path, base.Size, clock(bj.Status.LastBackupTime.Time),
		backupv1.RunNowAnnotation, runNow)
	if w := bj.Status.PointInTime; w != nil && w.Earliest != nil {
		latest := "not read yet"
		if w.Latest != nil {
			latest = clock(w.Latest.Time)
		}
		fmt.Printf("  window    status.pointInTime: earliest %s, latest %s, last segment %s (a restore to any second between them)\n",
			clock(w.Earliest.Time), latest, or(w.LastSegment, "-"))
	}

	// 3. The writes, after the migration's verification of the same
	// database (a write during its copy would be a verification mismatch).
	mkey := client.ObjectKeyFromObject(s.migration)
	mj := &migrationv1.MigrationJob{}
	if err := poll("migrationjob/"+mkey.Name+" ReadyForCutover (the writes below come after its verification)", func() (bool, error) {
		if err := c.Get(ctx, mkey, mj); err != nil {
			return false, err
		}
		if mj.Status.Phase == migrationv1.PhaseFailed {
			printConditions(mj)
			return false, fmt.Errorf("migrationjob/%s failed (see migration.log)", mkey.Name)
		}
		return mj.Status.Phase == migrationv1.PhaseReadyForCutover, nil
	}); err != nil {
		return err
	}
	db := bj.Spec.Database.Database
	write := func(label, q string) (time.Time, error) {
		if _, err := pg.SQL(db, q); err != nil {
			return time.Time{}, fmt.Errorf("%s: %w", label, err)
		}
		at := time.Now()
		fmt.Printf("  %-9s %s  %s\n", label, clock(at), q)
		return at, nil
	}
	fmt.Printf("  writes to the source %s after the base (migrationjob/%s is %s: cutover copies them):\n", db, mkey.Name, mj.Status.Phase)
	if _, err := write("t1", fmt.Sprintf("INSERT INTO orders VALUES (%d, 1, 10.00, 'A', now())", pitrOrderA)); err != nil {
		return err
	}
	t2, err := write("t2", fmt.Sprintf("INSERT INTO orders VALUES (%d, 2, 20.00, 'B', now())", pitrOrderB))
	if err != nil {
		return err
	}
	// The second after B's commit: a whole second, as the RestoreJob takes.
	between := t2.Truncate(time.Second).Add(time.Second)
	if err := wait.PollUntilContextTimeout(ctx, 20*time.Millisecond, 5*time.Second, true, func(context.Context) (bool, error) {
		return time.Now().After(between), nil
	}); err != nil {
		return err
	}
	t3, err := write("t3", fmt.Sprintf("DELETE FROM orders WHERE id = %d", pitrOrderA))
	if err != nil {
		return err
	}

	// 4. The restore to the second between t2 and t3.
	tz, _ := time.LoadLocation(bj.Spec.TimeZone)
	if tz == nil {
		tz = time.UTC
	}
	at := between.In(tz).Format(time.RFC3339)
	rj, err := restoreToTime(ctx, c, p.restore, at)
	if err != nil {
		return err
	}
	fmt.Printf("  restorejob/%s: spec.source.pointInTime %q (%s: after t2 %s, before t3 %s) into %s: %s\n",
		rj.Name, at, clock(between), clock(t2), clock(t3), rj.Spec.Target.Database, rj.Status.Phase)
	if rj.Status.RecoveryPoint == nil || rj.Status.Artifact == nil {
		return fmt.Errorf("restorejob/%s succeeded without status.recoveryPoint or status.artifact", rj.Name)
	}
	fmt.Printf("    status.recoveryPoint %s (%s); status.artifact %s (the base); status.attempts %d\n",
		rj.Status.RecoveryPoint.UTC().Format(time.RFC3339), clock(rj.Status.RecoveryPoint.Time), rj.Status.Artifact.Path, rj.Status.Attempts)
	if ready := conditions.Get(rj, cairnv1.ReadyCondition); ready != nil {
		fmt.Printf("    Ready %s %s: %s\n", ready.Status, ready.Reason, ready.Message)
	}

	// Side by side: the source now, the restored database at that second.
	rows := func(db string) (map[string]string, error) {
		out, err := pg.SQL(db, fmt.Sprintf("SELECT id, status, amount FROM orders WHERE id IN (%d, %d) ORDER BY id", pitrOrderA, pitrOrderB))
		if err != nil {
			return nil, err
		}
		m := map[string]string{}
		for _, l := range strings.Split(out, "\n") {
			if id, rest, ok := strings.Cut(l, "|"); ok {
				m[id] = strings.ReplaceAll(rest, "|", " ")
			}
		}
		count, err := pg.SQL(db, "SELECT count(*) FROM orders")
		m["count"] = count
		return m, err
	}
	src, err := rows(db)
	if err != nil {
		return err
	}
	dst, err := rows(rj.Spec.Target.Database)
	if err != nil {
		return err
	}
	none := func(s string) string { return or(s, "-") }
	fmt.Printf("\n    %-18s %-30s %s\n", "ORDERS", "SOURCE "+db+" (now)", "RESTORED "+rj.Spec.Target.Database+" (at "+clock(rj.Status.RecoveryPoint.Time)+")")
	for _, id := range []int{pitrOrderA, pitrOrderB} {
		k := fmt.Sprint(id)
		fmt.Printf("    %-18s %-30s %s\n", "order "+k, none(src[k]), none(dst[k]))
	}
	fmt.Printf("    %-18s %-30s %s\n", "count(*)", src["count"], dst["count"])
	a, b := fmt.Sprint(pitrOrderA), fmt.Sprint(pitrOrderB)
	if src[a] != "" || src[b] == "" || dst[a] == "" || dst[b] == "" {
		return fmt.Errorf("point-in-time: want orders %s and %s in the restore and only %s in the source (see above)", a, b, b)
	}
	if !rj.Status.RecoveryPoint.Time.Equal(between) {
		return fmt.Errorf("restorejob/%s reached %s, not the time asked for %s", rj.Name, rj.Status.RecoveryPoint.UTC().Format(time.RFC3339), at)
	}
	if rj.Status.Artifact.Path != base.Path {
		return fmt.Errorf("restorejob/%s restored %s, not the base %s", rj.Name, rj.Status.Artifact.Path, base.Path)
	}
	return nil
}

// restoreToTime applies the sample RestoreJob with spec.source.pointInTime
// at and waits until it ended. A restore the agent refused as outside the
// recoverable window — the second asked for not archived yet: the segment
// holding it closes within maxSegmentAge — is deleted and applied again
// (its spec is immutable) until it succeeds, within pitrRestoreDeadline.
func restoreToTime(ctx context.Context, c client.Client, sample *unstructured.Unstructured, at string) (*restorev1.RestoreJob, error) {
	o := sample.DeepCopy()
	if err := unstructured.SetNestedField(o.Object, at, "spec", "source", "pointInTime"); err != nil {
		return nil, err
	}
	key := client.ObjectKeyFromObject(o)
	deadline := time.Now().Add(pitrRestoreDeadline)
	for {
		if err := apply(ctx, c, o); err != nil {
			return nil, err
		}
		rj := &restorev1.RestoreJob{}
		if err := wait.PollUntilContextCancel(ctx, time.Second, true, func(ctx context.Context) (bool, error) {
			if err := c.Get(ctx, key, rj); err != nil {
				return false, client.IgnoreNotFound(err)
			}
			return rj.Status.Phase == restorev1.PhaseSucceeded || rj.Status.Phase == restorev1.PhaseFailed, nil
		}); err != nil {
			return nil, fmt.Errorf("waiting for restorejob/%s: %w", key.Name, err)
		}
		if rj.Status.Phase == restorev1.PhaseSucceeded {
			return rj, nil
		}
		stalled := conditions.Get(rj, cairnv1.StalledCondition)
		if stalled == nil || stalled.Reason != restorev1.RestoreJobOutsideWindowReason || time.Now().After(deadline) {
			var msgs []string
			for _, cond := range rj.Status.Conditions {
				msgs = append(msgs, fmt.Sprintf("%s=%s %s: %s", cond.Type, cond.Status, cond.Reason, cond.Message))
			}
			return nil, fmt.Errorf("restorejob/%s to %s failed: %s (see restore.log)", key.Name, at, strings.Join(msgs, "; "))
		}
		fmt.Printf("  restorejob/%s: %s not archived yet (%s); deleted, applied again\n", key.Name, at, stalled.Message)
		if err := c.Delete(ctx, rj); client.IgnoreNotFound(err) != nil {
			return nil, err
		}
		if err := wait.PollUntilContextCancel(ctx, 200*time.Millisecond, true, func(ctx context.Context) (bool, error) {
			err := c.Get(ctx, key, &restorev1.RestoreJob{})
			return err != nil, client.IgnoreNotFound(err)
		}); err != nil {
			return nil, fmt.Errorf("waiting for restorejob/%s to be deleted: %w", key.Name, err)
		}
	}
}

// clock is a time as the demo prints it (local, to the millisecond).
func clock(t time.Time) string { return t.Local().Format("15:04:05.000") }
