package data_test

import (
	"context"
	"encoding/json"
	"os"
	"path"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/minio/minio-go/v7"
	. "github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	backupv1 "cairn.dev/apis/backup/v1"
	cairnv1 "cairn.dev/apis/meta/v1"
	restorev1 "cairn.dev/apis/restore/v1"
	"cairn.dev/e2e/fixtures"
	"cairn.dev/e2e/install"
	"cairn.dev/libs/conditions"
)

// Point-in-time recovery of PostgreSQL end to end: the archiver (WAL over
// a physical replication slot) as a real pod, physical bases, and restores
// that recover the base in a temporary server inside the restore pod and
// move the database into the target by address. Insert A, then inside the
// window an ALTER TABLE … ADD COLUMN, a sequence and insert B, then delete
// A: a restore to a second between B and the delete has A and B with the
// new column and the sequence past its values; latest has B only (the
// archiver's pod was killed after the base: the chain is whole). Then a
// segment deleted from the store by hand: the operator's archive check
// reports the gap (PointInTimeReady False/ArchiveGap, the gaps series on
// the backup operator's /metrics), and a restore across it is refused
// before its target exists. Turning point-in-time off drops the slot.
// On both stores. On S3 the archiver is also stopped for longer than the
// limit first (archiverStopped): the check drops the slot; the WAL it
// kept is then removed, and the archive shows the break as a gap.
func TestPointInTimeRecoveryPostgres(t *testing.T) {
	for _, kind := range []string{"s3", "pvc"} {
		t.Run(kind, func(t *testing.T) { pointInTimePostgres(t, kind) })
	}
}

func pointInTimePostgres(t *testing.T, kind string) {
	g := NewWithT(t)
	ctx := context.Background()
	e := postgres()
	ns := namespace(t, e)
	src := dbName(ns, "shop")
	sql := func(q string) string {
		t.Helper()
		out, err := e.sql.SQL(src, q)
		if err != nil {
			t.Fatalf("%s: %v", q, err)
		}
		return strings.TrimSpace(out)
	}
	_, err := e.sql.SQL("postgres", "CREATE DATABASE "+src)
	g.Expect(err).NotTo(HaveOccurred())
	t.Cleanup(func() { _, _ = e.sql.SQL("postgres", "DROP DATABASE IF EXISTS "+src+" WITH (FORCE)") })
	sql("CREATE TABLE orders (id int PRIMARY KEY, note text NOT NULL); INSERT INTO orders VALUES (0, 'before the base')")

	storage := s3Storage(ns + "/shop")
	if kind == "pvc" {
		storage = pvcStorage(t, ns, "backups")
	}
	bj := backupJob(ns, "shop", e, src, fixtures.Yearly, storage)
	bj.Spec.PointInTime = &backupv1.PointInTimeSpec{MaxSegmentAge: &metav1.Duration{Duration: 10 * time.Second},
		CheckInterval: &metav1.Duration{Duration: time.Minute}, MaxRetainedWAL: ptr.To(resource.MustParse("256Mi"))}
	g.Expect(env.Client.Create(ctx, bj)).To(Succeed())
	stopArchiverAtEnd(t, bj)
	waitPointInTimeReady(t, bj)
	created := time.Now()
	fixtures.SetRunNow(g, env.Client, bj, "base")
	base := waitSucceeded(t, bj, created, 4*time.Minute)
	g.Expect(base.LastArtifact.Path).To(HaveSuffix(".pgbase.tar.zst"), "a physical base")
	killArchiver(t, bj) // the restores below cross the kill: a gap would refuse them

	sql("INSERT INTO orders VALUES (1, 'A')")
	fixtures.WaitPast(t, time.Now().Truncate(time.Second).Add(time.Second))
	sql("ALTER TABLE orders ADD COLUMN region text NOT NULL DEFAULT 'eu'; CREATE SEQUENCE order_no; SELECT nextval('order_no'); SELECT nextval('order_no')")
	sql("INSERT INTO orders VALUES (2, 'B', 'asia')")
	between := time.Now().Truncate(time.Second).Add(time.Second)
	fixtures.WaitPast(t, between)
	sql("DELETE FROM orders WHERE id = 1")
	afterDelete := time.Now().Truncate(time.Second).Add(time.Second)
	fixtures.WaitPast(t, afterDelete)

	query := func(db, q string) string {
		t.Helper()
		out, err := e.sql.SQL(db, q)
		g.Expect(err).NotTo(HaveOccurred(), "%s in %s", q, db)
		return strings.TrimSpace(out)
	}
	rows := func(db string) string {
		return query(db, "SELECT string_agg(id || ':' || region, ',' ORDER BY id) FROM orders")
	}
	at := restoreToTime(t, bj, e, "between", between.UTC().Format(time.RFC3339))
	between0 := dbName(ns, "between")
	t.Cleanup(func() { _, _ = e.sql.SQL("postgres", "DROP DATABASE IF EXISTS "+between0+" WITH (FORCE)") })
	g.Expect(rows(between0)).To(Equal("0:eu,1:eu,2:asia"), "A and B, with the column added inside the window")
	g.Expect(query(between0, "SELECT nextval('order_no')")).To(Satisfy(func(s string) bool { return s > "2" || len(s) > 1 }),
		"the sequence continues past the values it gave")
	g.Expect(at.Status.RecoveryPoint.UTC()).To(Equal(between.UTC()))
	g.Expect(at.Status.Artifact.Path).To(Equal(base.LastArtifact.Path))
	latest := restoreToTime(t, bj, e, "latest", "latest")
	latest0 := dbName(ns, "latest")
	t.Cleanup(func() { _, _ = e.sql.SQL("postgres", "DROP DATABASE IF EXISTS "+latest0+" WITH (FORCE)") })
	g.Expect(rows(latest0)).To(Equal("0:eu,2:asia"), "after the delete: B only")
	g.Expect(latest.Status.RecoveryPoint.Time).To(BeTemporally(">=", afterDelete.Add(-time.Second)))

	if kind == "s3" {
		archiverStopped(t, bj, e, query)
	}

	// A middle segment deleted by hand: the archive check reports the gap.
	// After the base's own segment (deleting that one puts the base
	// outside the window instead; the catalog entry names it) and before
	// the newest: waited for, as segments close every maxSegmentAge.
	entryKey := path.Join(path.Dir(base.LastArtifact.Path), "entries", path.Base(base.LastArtifact.Path)+".json")
	var entry struct {
		WALBase struct {
			File string `json:"file"`
		} `json:"walBase"`
	}
	g.Expect(json.Unmarshal(stored(t, bj, entryKey), &entry)).To(Succeed())
	g.Expect(entry.WALBase.File).NotTo(BeEmpty(), "the base's catalog entry %s names its WAL segment", entryKey)
	var victim string
	g.Eventually(func(g Gomega) {
		var segs []string
		for _, k := range allObjects(t, bj) {
			if strings.Contains(k, "_wal/") && strings.HasSuffix(k, ".zst") {
				segs = append(segs, k)
			}
		}
		sort.Strings(segs)
		victim = ""
		stored := map[uint64]bool{}
		for _, k := range segs {
			stored[walNo(k)] = true
		}
		// Its neighbours both stored: the gap it leaves is its own, not
		// merged with a break already there (the stopped archiver's).
		for _, k := range segs {
			n := walNo(k)
			if strings.TrimSuffix(path.Base(k), ".zst") > entry.WALBase.File && stored[n-1] && stored[n+1] {
				victim = k
				break
			}
		}
		g.Expect(victim).NotTo(BeEmpty(), "no segment after the base's %s with both neighbours stored yet: %v", entry.WALBase.File, segs)
	}).WithTimeout(2 * time.Minute).WithPolling(time.Second).Should(Succeed())
	for _, k := range []string{victim, strings.TrimSuffix(victim, ".zst") + ".json"} {
		if s := bj.Spec.Storage.S3; s != nil {
			g.Expect(env.Servers.S3.Client().RemoveObject(ctx, s.Bucket, k, minio.RemoveObjectOptions{})).To(Succeed())
		} else {
			g.Expect(os.Remove(pvcPath(bj, k))).To(Succeed())
		}
	}
	name := victim[strings.LastIndex(victim, "/")+1:]
	name = strings.TrimSuffix(name, ".zst")
	g.Eventually(func(g Gomega) {
		got := fixtures.Get(g, env.Client, bj)
		c := conditions.Get(got, backupv1.PointInTimeReadyCondition)
		g.Expect(c).NotTo(BeNil())
		g.Expect(c.Reason).To(Equal(backupv1.ArchiveGapReason), "%s", c.Message)
		g.Expect(c.Message).To(ContainSubstring(name))
		if kind == "s3" {
			// The break the stopped archiver left is one more.
			g.Expect(got.Status.PointInTime.Gaps).To(HaveLen(2), "%s", c.Message)
		}
		samples, err := env.Operators["backup"].Metrics(ctx)
		g.Expect(err).NotTo(HaveOccurred())
		v, ok := install.Find(samples, "cairn_backupjob_point_in_time_gaps", map[string]string{"namespace": ns, "name": "shop"})
		g.Expect(ok).To(BeTrue(), "no gaps series")
		g.Expect(v).To(BeNumerically(">=", 1))
		_, ok = install.Find(samples, "cairn_backupjob_point_in_time_retained_wal_bytes", map[string]string{"namespace": ns, "name": "shop"})
		g.Expect(ok).To(BeTrue(), "no retained-WAL series")
	}).WithTimeout(3 * time.Minute).WithPolling(2 * time.Second).Should(Succeed())
	g.Expect(alertExpr(t, "CairnPointInTimeArchiveGap")).To(ContainSubstring("cairn_backupjob_point_in_time_gaps"))
	across := pitRestoreJob(bj, e, "across", "latest")
	g.Expect(env.Client.Create(ctx, across)).To(Succeed())
	across = waitRestore(t, across, 4*time.Minute)
	g.Expect(across.Status.Phase).To(Equal(restorev1.PhaseFailed))
	g.Expect(conditions.Get(across, cairnv1.StalledCondition).Reason).To(Equal(restorev1.RestoreJobArchiveGapReason), "%s", lastMessage(across.Status.Conditions))
	exists, err := e.exists(dbName(ns, "across"))
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(exists).To(BeFalse(), "a restore across the gap created its target")

	// Off: the archiver goes and its slot is dropped from the source.
	slot := fixtures.Get(g, env.Client, bj).Status.PointInTime.Check.Slot
	g.Expect(slot).NotTo(BeEmpty())
	g.Expect(query("postgres", "SELECT count(*) FROM pg_replication_slots WHERE slot_name = '"+slot+"'")).To(Equal("1"))
	g.Eventually(func() error {
		cur := fixtures.Get(g, env.Client, bj)
		cur.Spec.PointInTime = nil
		return env.Client.Update(ctx, cur)
	}).WithTimeout(30 * time.Second).Should(Succeed())
	g.Eventually(func(g Gomega) {
		g.Expect(query("postgres", "SELECT count(*) FROM pg_replication_slots WHERE slot_name = '"+slot+"'")).To(Equal("0"))
		g.Expect(fixtures.Get(g, env.Client, bj).Status.PointInTime).To(BeNil())
	}).WithTimeout(3 * time.Minute).WithPolling(2 * time.Second).Should(Succeed())
}

// archiverStopped: bj's archiver cannot run (its pods refused by the API
// server, as a policy engine or a quota would) while the source writes more
// WAL than spec.pointInTime.maxRetainedWAL: the operator's archive check
// drops the slot on the source, PointInTimeReady says SlotDropped naming it;
// after a checkpoint has removed the WAL the slot kept, the archiver may run
// again and creates the slot anew (the break is a gap in the archive: the
// gap phase after this sees it beside the segment it deletes).
func archiverStopped(t *testing.T, bj *backupv1.BackupJob, e engine, query func(db, q string) string) {
	g := NewWithT(t)
	ctx := context.Background()
	var slot string
	g.Eventually(func(g Gomega) {
		st := fixtures.Get(g, env.Client, bj).Status.PointInTime
		g.Expect(st).NotTo(BeNil())
		g.Expect(st.Check).NotTo(BeNil(), "no archive check yet")
		slot = st.Check.Slot
		g.Expect(slot).NotTo(BeEmpty())
	}).WithTimeout(2 * time.Minute).WithPolling(time.Second).Should(Succeed())
	archiver := map[string]string{backupv1.RunKindLabel: "archiver", fixtures.BackupJobLabel: bj.Name}
	release := fixtures.HoldPods(t, g, env.Client, bj.Namespace, archiver)
	g.Expect(env.Client.DeleteAllOf(ctx, &corev1.Pod{}, client.InNamespace(bj.Namespace), client.MatchingLabels(archiver))).To(Succeed())
	archiverPodsGone(t, bj.Namespace)
	stopped := time.Now()

	// Past the limit: every pg_switch_wal after a write starts a new 16 MB
	// segment, which the inactive slot keeps.
	const limit = 256 << 20
	retained := func() int64 {
		out := query("postgres", "SELECT COALESCE((SELECT pg_current_wal_lsn() - restart_lsn FROM pg_replication_slots WHERE slot_name = '"+slot+"'), -1)")
		n, err := strconv.ParseInt(out, 10, 64)
		g.Expect(err).NotTo(HaveOccurred(), "retained WAL %q", out)
		return n
	}
	query("postgres", "CREATE TABLE IF NOT EXISTS e2e_wal_pump (n int)")
	for i := 0; retained() <= limit; i++ {
		g.Expect(i).To(BeNumerically("<", 40), "the slot does not retain the WAL written")
		query("postgres", "INSERT INTO e2e_wal_pump VALUES (1); SELECT pg_switch_wal()")
	}
	g.Eventually(func(g Gomega) {
		cur := fixtures.Get(g, env.Client, bj)
		c := conditions.Get(cur, backupv1.PointInTimeReadyCondition)
		g.Expect(c).NotTo(BeNil())
		g.Expect(c.Status).To(Equal(metav1.ConditionFalse))
		g.Expect(c.Reason).To(Equal(backupv1.SlotDroppedReason), "%s", c.Message)
		g.Expect(c.Message).To(ContainSubstring(slot))
		g.Expect(cur.Status.PointInTime.Check.SlotDroppedTime).NotTo(BeNil())
		g.Expect(cur.Status.PointInTime.Check.SlotDroppedTime.Time).To(BeTemporally(">", stopped.Add(-time.Second)))
	}).WithTimeout(3*time.Minute).WithPolling(2*time.Second).Should(Succeed(), "the check drops the slot of the stopped archiver")
	g.Expect(query("postgres", "SELECT count(*) FROM pg_replication_slots WHERE slot_name = '"+slot+"'")).To(Equal("0"),
		"the slot is gone from the source")

	// A checkpoint lets the server remove the WAL the slot kept (it would
	// come on its own; until then a new slot, reserved from the last
	// checkpoint's redo point, still finds all of it and the archive
	// resumes without a gap).
	query("postgres", "CHECKPOINT")

	// The archiver may run again: its ReplicaSet is deleted so that the
	// Deployment makes a pod at once (the one the hold refused retries
	// with a growing back-off).
	release()
	g.Expect(env.Client.DeleteAllOf(ctx, &appsv1.ReplicaSet{}, client.InNamespace(bj.Namespace), client.MatchingLabels(archiver))).To(Succeed())
	g.Eventually(func(g Gomega) {
		g.Expect(query("postgres", "SELECT count(*) FROM pg_replication_slots WHERE slot_name = '"+slot+"'")).To(Equal("1"))
	}).WithTimeout(2*time.Minute).WithPolling(time.Second).Should(Succeed(), "the archiver runs again with a new slot")
	// Segments after the break (an idle server closes none): the gap phase
	// deletes one with both neighbours stored.
	for range 3 {
		query("postgres", "INSERT INTO e2e_wal_pump VALUES (2); SELECT pg_switch_wal()")
	}
	t.Logf("archiver stopped at %s, slot dropped and the archiver back by %s", stopped.Format(time.TimeOnly), time.Now().Format(time.TimeOnly))
}

// walNo is the number of the WAL segment stored under key (16 MB segments:
// the name's log and segment parts, 256 segments a log).
func walNo(key string) uint64 {
	name := strings.TrimSuffix(path.Base(key), ".zst")
	if len(name) != 24 {
		return 0
	}
	log, err1 := strconv.ParseUint(name[8:16], 16, 64)
	seg, err2 := strconv.ParseUint(name[16:24], 16, 64)
	if err1 != nil || err2 != nil {
		return 0
	}
	return log<<8 | seg
}

// killArchiver deletes bj's archiver pod and waits for the pod that
// replaces it to be ready (its probe: caught up), which resumes from the
// slot where the killed one stopped.
func killArchiver(t *testing.T, bj *backupv1.BackupJob) {
	g := NewWithT(t)
	ctx := context.Background()
	archiver := client.MatchingLabels{backupv1.RunKindLabel: "archiver", fixtures.BackupJobLabel: bj.Name}
	var pods corev1.PodList
	g.Expect(env.Client.List(ctx, &pods, client.InNamespace(bj.Namespace), archiver)).To(Succeed())
	g.Expect(pods.Items).To(HaveLen(1), "one archiver pod")
	killed := pods.Items[0].UID
	g.Expect(env.Client.Delete(ctx, &pods.Items[0], client.GracePeriodSeconds(0))).To(Succeed())
	g.Eventually(func(g Gomega) {
		g.Expect(env.Client.List(ctx, &pods, client.InNamespace(bj.Namespace), archiver)).To(Succeed())
		ready := false
		for _, p := range pods.Items {
			for _, c := range p.Status.Conditions {
				ready = ready || p.UID != killed && c.Type == corev1.PodReady && c.Status == corev1.ConditionTrue
			}
		}
		g.Expect(ready).To(BeTrue(), "a new archiver pod is ready: %d pod(s)", len(pods.Items))
	}).WithTimeout(2*time.Minute).WithPolling(time.Second).Should(Succeed(), "a new archiver replaces the killed one")
}
