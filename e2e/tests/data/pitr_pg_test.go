package data_test

import (
	"context"
	"encoding/json"
	"os"
	"path"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/minio/minio-go/v7"
	. "github.com/onsi/gomega"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

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
// new column and the sequence past its values; latest has B only. Then a
// segment deleted from the store by hand: the operator's archive check
// reports the gap (PointInTimeReady False/ArchiveGap, the gaps series on
// the backup operator's /metrics), and a restore across it is refused
// before its target exists. Turning point-in-time off drops the slot.
// PVC here; the agent's suites run the same on S3 (and the MariaDB test
// above runs both stores end to end).
func TestPointInTimeRecoveryPostgres(t *testing.T) {
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

	bj := backupJob(ns, "shop", e, src, fixtures.Yearly, pvcStorage(t, ns, "backups"))
	bj.Spec.PointInTime = &backupv1.PointInTimeSpec{MaxSegmentAge: &metav1.Duration{Duration: 10 * time.Second},
		CheckInterval: &metav1.Duration{Duration: time.Minute}}
	g.Expect(env.Client.Create(ctx, bj)).To(Succeed())
	stopArchiverAtEnd(t, bj)
	waitPointInTimeReady(t, bj)
	created := time.Now()
	fixtures.SetRunNow(g, env.Client, bj, "base")
	base := waitSucceeded(t, bj, created, 4*time.Minute)
	g.Expect(base.LastArtifact.Path).To(HaveSuffix(".pgbase.tar.zst"), "a physical base")

	sql("INSERT INTO orders VALUES (1, 'A')")
	waitPast(t, time.Now().Truncate(time.Second).Add(time.Second))
	sql("ALTER TABLE orders ADD COLUMN region text NOT NULL DEFAULT 'eu'; CREATE SEQUENCE order_no; SELECT nextval('order_no'); SELECT nextval('order_no')")
	sql("INSERT INTO orders VALUES (2, 'B', 'asia')")
	between := time.Now().Truncate(time.Second).Add(time.Second)
	waitPast(t, between)
	sql("DELETE FROM orders WHERE id = 1")
	afterDelete := time.Now().Truncate(time.Second).Add(time.Second)
	waitPast(t, afterDelete)

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
		for _, k := range segs[:max(len(segs)-1, 0)] {
			if strings.TrimSuffix(path.Base(k), ".zst") > entry.WALBase.File {
				victim = k
				break
			}
		}
		g.Expect(victim).NotTo(BeEmpty(), "no segment after the base's %s and before the newest yet: %v", entry.WALBase.File, segs)
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
