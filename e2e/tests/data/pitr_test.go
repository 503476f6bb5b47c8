package data_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"sigs.k8s.io/controller-runtime/pkg/client"

	backupv1 "cairn.dev/apis/backup/v1"
	cairnv1 "cairn.dev/apis/meta/v1"
	restorev1 "cairn.dev/apis/restore/v1"
	"cairn.dev/e2e/fixtures"
	"cairn.dev/libs/conditions"
)

// Point-in-time recovery end to end (MariaDB with its binary log on, S3 and
// a PVC): a BackupJob with spec.pointInTime runs its archiver as a real
// pod, which turns PointInTimeReady True; after a base, insert A, insert B,
// delete A: a RestoreJob to a second between B and the delete has A and B,
// one to after the delete and one to latest have B only, each recording
// the second reached; a time before the base is refused before its target
// exists. The archiver's pod killed: a new one resumes, a write after it
// is recoverable, and the next backup reports no gap. The two stores run
// one after the other: the pod runner runs agent pods in the host's
// network, where two archivers would both answer their probe on port 8080
// (on a cluster each pod has its own address).
func TestPointInTimeRecovery(t *testing.T) {
	for _, store := range []string{"s3", "pvc"} {
		t.Run(store, func(t *testing.T) {
			g := NewWithT(t)
			ctx := context.Background()
			e := mariadb()
			ns := namespace(t, e)
			src := dbName(ns, "shop")
			sql := func(q string) {
				t.Helper()
				if _, err := e.sql.SQL(src, q); err != nil {
					t.Fatalf("%s: %v", q, err)
				}
			}
			_, err := e.sql.SQL("", "CREATE DATABASE "+src)
			g.Expect(err).NotTo(HaveOccurred())
			sql("CREATE TABLE orders (id INT PRIMARY KEY, note VARCHAR(40) NOT NULL); INSERT INTO orders VALUES (0, 'before the base')")

			storage := s3Storage(ns)
			if store == "pvc" {
				storage = pvcStorage(t, ns, "backups")
			}
			bj := backupJob(ns, "shop", e, src, fixtures.Yearly, storage)
			bj.Spec.PointInTime = &backupv1.PointInTimeSpec{MaxSegmentAge: &metav1.Duration{Duration: 10 * time.Second}}
			g.Expect(env.Client.Create(ctx, bj)).To(Succeed())
			stopArchiverAtEnd(t, bj)
			waitPointInTimeReady(t, bj)

			created := time.Now()
			fixtures.SetRunNow(g, env.Client, bj, "base")
			base := waitSucceeded(t, bj, created, 3*time.Minute)

			sql("INSERT INTO orders VALUES (1, 'A')")
			fixtures.WaitPast(t, time.Now().Truncate(time.Second).Add(time.Second))
			sql("INSERT INTO orders VALUES (2, 'B')")
			between := time.Now().Truncate(time.Second).Add(time.Second)
			fixtures.WaitPast(t, between)
			sql("DELETE FROM orders WHERE id = 1")
			afterDelete := time.Now().Truncate(time.Second).Add(time.Second)
			fixtures.WaitPast(t, afterDelete)

			ids := func(db string) string {
				t.Helper()
				out, err := e.sql.SQL(db, "SELECT GROUP_CONCAT(id ORDER BY id) FROM orders")
				g.Expect(err).NotTo(HaveOccurred())
				return strings.TrimSpace(out)
			}
			// To a second between B and the delete of A: A and B. (Until
			// that second is archived the agent refuses it as outside the
			// window; a new RestoreJob then asks again.)
			at := restoreToTime(t, bj, e, "between", between.UTC().Format(time.RFC3339))
			g.Expect(ids(dbName(ns, "between"))).To(Equal("0,1,2"))
			g.Expect(at.Status.RecoveryPoint.UTC()).To(Equal(between.UTC()))
			g.Expect(at.Status.Artifact.Path).To(Equal(base.LastArtifact.Path), "the base before that time")
			// In the zone the user writes: the same second.
			shanghai, _ := time.LoadLocation("Asia/Shanghai")
			atZone := restoreToTime(t, bj, e, "zoned", afterDelete.In(shanghai).Format(time.RFC3339))
			g.Expect(ids(dbName(ns, "zoned"))).To(Equal("0,2"), "after the delete: B only")
			g.Expect(atZone.Status.RecoveryPoint.UTC()).To(Equal(afterDelete.UTC()))
			latest := restoreToTime(t, bj, e, "latest", "latest")
			g.Expect(ids(dbName(ns, "latest"))).To(Equal("0,2"))
			g.Expect(latest.Status.RecoveryPoint.Time).To(BeTemporally(">=", afterDelete.Add(-time.Second)))

			// Before the base: refused, the target never created.
			early := pitRestoreJob(bj, e, "early", "2020-01-01T00:00:00Z")
			g.Expect(env.Client.Create(ctx, early)).To(Succeed())
			early = waitRestore(t, early, 3*time.Minute)
			g.Expect(early.Status.Phase).To(Equal(restorev1.PhaseFailed))
			g.Expect(conditions.Get(early, cairnv1.StalledCondition).Reason).To(Equal(restorev1.RestoreJobOutsideWindowReason),
				"%s", lastMessage(early.Status.Conditions))
			exists, err := e.exists(dbName(ns, "early"))
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(exists).To(BeFalse(), "a refused point-in-time restore created its target")

			// The archiver's pod killed: a new one resumes with no gap.
			var pods corev1.PodList
			g.Expect(env.Client.List(ctx, &pods, client.InNamespace(ns), client.MatchingLabels{backupv1.RunKindLabel: "archiver"})).To(Succeed())
			g.Expect(pods.Items).NotTo(BeEmpty())
			for i := range pods.Items {
				g.Expect(env.Client.Delete(ctx, &pods.Items[i], client.GracePeriodSeconds(0))).To(Succeed())
			}
			sql("INSERT INTO orders VALUES (3, 'after the archiver restarted')")
			afterKill := time.Now().Truncate(time.Second).Add(time.Second)
			fixtures.WaitPast(t, afterKill)
			waitPointInTimeReady(t, bj)
			restoreToTime(t, bj, e, "afterkill", afterKill.UTC().Format(time.RFC3339))
			g.Expect(ids(dbName(ns, "afterkill"))).To(Equal("0,2,3"))
			again := time.Now()
			fixtures.SetRunNow(g, env.Client, bj, "again")
			st := waitSucceeded(t, bj, again, 3*time.Minute)
			g.Expect(st.PointInTime).NotTo(BeNil())
			g.Expect(st.PointInTime.Gaps).To(BeEmpty(), "the archive after a restart of its archiver")
			g.Expect(st.PointInTime.Earliest.UTC()).To(BeTemporally("<=", between), "recoverable from the first base")
			g.Expect(st.PointInTime.Latest.Time).To(BeTemporally(">=", afterKill.Add(-time.Second)))
			t.Logf("%s: window %s .. %s, %d segments, last %s", store, st.PointInTime.Earliest.UTC().Format(time.RFC3339),
				st.PointInTime.Latest.UTC().Format(time.RFC3339), st.PointInTime.Segments, st.PointInTime.LastSegment)

			// Off: the archiver and its pod go.
			g.Eventually(func() error {
				cur := fixtures.Get(g, env.Client, bj)
				cur.Spec.PointInTime = nil
				return env.Client.Update(ctx, cur)
			}).WithTimeout(30 * time.Second).Should(Succeed())
			g.Eventually(func(g Gomega) {
				var pods corev1.PodList
				g.Expect(env.Client.List(ctx, &pods, client.InNamespace(ns), client.MatchingLabels{backupv1.RunKindLabel: "archiver"})).To(Succeed())
				g.Expect(pods.Items).To(BeEmpty())
			}).WithTimeout(2 * time.Minute).WithPolling(time.Second).Should(Succeed())
		})
	}
}

// stopArchiverAtEnd turns bj's point-in-time off when the test ends (passed
// or not) and waits for its archiver's pods to go: the pod runner runs
// agent pods in the host's network, where a leftover archiver would answer
// the next test's readiness probe on the same port while that test's own
// archiver cannot bind it (a namespace's deletion takes its pods later).
func stopArchiverAtEnd(t *testing.T, bj *backupv1.BackupJob) {
	t.Cleanup(func() {
		g := NewWithT(t)
		ctx := context.Background()
		err := wait.PollUntilContextTimeout(ctx, time.Second, 30*time.Second, true, func(ctx context.Context) (bool, error) {
			cur := &backupv1.BackupJob{}
			if err := env.Client.Get(ctx, client.ObjectKeyFromObject(bj), cur); err != nil {
				return apierrors.IsNotFound(err), nil
			}
			if cur.Spec.PointInTime == nil {
				return true, nil
			}
			cur.Spec.PointInTime = nil
			return env.Client.Update(ctx, cur) == nil, nil
		})
		g.Expect(err).NotTo(HaveOccurred(), "turning point-in-time off at the end")
		archiverPodsGone(t, bj.Namespace)
	})
}

// archiverPodsGone waits for every archiver pod of namespace ns to go.
func archiverPodsGone(t *testing.T, ns string) {
	t.Helper()
	NewWithT(t).Eventually(func(g Gomega) {
		var pods corev1.PodList
		g.Expect(env.Client.List(context.Background(), &pods, client.InNamespace(ns), client.MatchingLabels{backupv1.RunKindLabel: "archiver"})).To(Succeed())
		g.Expect(pods.Items).To(BeEmpty())
	}).WithTimeout(2*time.Minute).WithPolling(time.Second).Should(Succeed(), "the archiver's pods in %s gone", ns)
}

// waitPointInTimeReady waits until bj's archiver is ready (its pod's
// readiness: caught up) and PointInTimeReady is True.
func waitPointInTimeReady(t *testing.T, bj *backupv1.BackupJob) {
	t.Helper()
	NewWithT(t).Eventually(func(g Gomega) {
		c := meta.FindStatusCondition(fixtures.Get(g, env.Client, bj).Status.Conditions, backupv1.PointInTimeReadyCondition)
		g.Expect(c).NotTo(BeNil())
		dep := &appsv1.Deployment{}
		_ = env.Client.Get(context.Background(), client.ObjectKey{Namespace: bj.Namespace, Name: bj.Name + "-archiver"}, dep)
		g.Expect(c.Status).To(Equal(metav1.ConditionTrue), "%s: %s (archiver: %d ready)", c.Reason, c.Message, dep.Status.ReadyReplicas)
	}).WithTimeout(3 * time.Minute).WithPolling(time.Second).Should(Succeed())
}

func pitRestoreJob(bj *backupv1.BackupJob, e engine, name, at string) *restorev1.RestoreJob {
	rj := restoreJob(bj, name, e, dbName(bj.Namespace, name), "")
	rj.Spec.Source.PointInTime = at
	return rj
}

// restoreToTime restores bj to at into database <ns>_<name>: a RestoreJob
// refused because the time is not archived yet is asked again (a new
// RestoreJob) until it succeeds, within 2 minutes.
func restoreToTime(t *testing.T, bj *backupv1.BackupJob, e engine, name, at string) *restorev1.RestoreJob {
	t.Helper()
	g := NewWithT(t)
	deadline := time.Now().Add(2 * time.Minute)
	for try := 1; ; try++ {
		rj := pitRestoreJob(bj, e, name, at)
		rj.Name = fmt.Sprintf("%s-%d", name, try)
		g.Expect(env.Client.Create(context.Background(), rj)).To(Succeed())
		rj = waitRestore(t, rj, 3*time.Minute)
		if rj.Status.Phase == restorev1.PhaseSucceeded {
			return rj
		}
		c := conditions.Get(rj, cairnv1.StalledCondition)
		if c == nil || c.Reason != restorev1.RestoreJobOutsideWindowReason || time.Now().After(deadline) {
			t.Fatalf("restore to %s: %s", at, lastMessage(rj.Status.Conditions))
		}
		t.Logf("restore to %s: not archived yet (%s); asking again", at, c.Message)
	}
}
