package data_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"path"
	"strings"
	"sync"
	"testing"
	"time"

	minio "github.com/minio/minio-go/v7"
	. "github.com/onsi/gomega"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	backupv1 "cairn.dev/apis/backup/v1"
	cairnv1 "cairn.dev/apis/meta/v1"
	platformv1 "cairn.dev/apis/platform/v1"
	restorev1 "cairn.dev/apis/restore/v1"
	"cairn.dev/e2e/fixtures"
	"cairn.dev/e2e/install"
	"cairn.dev/libs/conditions"
)

// A ProtectionPlan with point-in-time recovery on MariaDB (S3), end to end:
// its BackupJob's archiver runs as a real pod; with a writer running, the
// rpo is judged on the archive (status.rpo.basis PointInTime) and the drill
// restores to "now minus maxLag" — later than the newest backup, so only
// the replayed log holds the writer's rows, which a check demands — and
// reaches exactly that second (RecoverabilityVerified True). Then the
// database goes idle: once the archiver's proof of quiet is stored after
// the last write, a backup taken on the idle server is verified the same
// way (before the proof of quiet, an idle MariaDB's archive stopped at its
// last change and such a drill was refused OutsideRecoverableWindow).
func TestProtectionPlanPointInTime(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	e := mariadb()
	ns := namespace(t, e)
	src, scratch := dbName(ns, "shop"), dbName(ns, "shop_verify")
	g.Expect(e.seed(src, 200)).To(Succeed())

	const maxLag = 30 * time.Second
	plan := &platformv1.ProtectionPlan{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "shop"},
		Spec: platformv1.ProtectionPlanSpec{
			Database: cairnv1.DatabaseRef{Engine: e.name, Host: "127.0.0.1", Port: int32(e.port), Database: src,
				CredentialsSecretRef: cairnv1.LocalObjectReference{Name: "db"}},
			Backup: platformv1.BackupTemplate{Schedule: fixtures.Yearly, MaxRetries: ptr.To[int32](1),
				ActiveDeadlineSeconds: ptr.To[int64](600), Storage: s3Storage(ns),
				PointInTime: &backupv1.PointInTimeSpec{MaxSegmentAge: &metav1.Duration{Duration: 10 * time.Second},
					MaxLag: &metav1.Duration{Duration: maxLag}}},
			Verification: platformv1.VerificationSpec{
				EveryNBackups: ptr.To[int32](1),
				RestoreInto: platformv1.ScratchDatabase{Host: "127.0.0.1", Port: int32(e.port), Database: scratch,
					CredentialsSecretRef: cairnv1.LocalObjectReference{Name: "db"}},
				// Rows the writer added after the base: only a replay of
				// the archived log brings them.
				Checks:         []restorev1.Check{{Name: "replayed", SQL: "select count(*) from orders where id > 100000", AtLeast: ptr.To[int64](1)}},
				TimeoutSeconds: ptr.To[int64](600),
			},
			Objectives:     platformv1.Objectives{RPO: metav1.Duration{Duration: 5 * time.Minute}},
			DeletionPolicy: backupv1.DeletionPolicyDelete,
		},
	}
	g.Expect(env.Client.Create(ctx, plan)).To(Succeed())
	// The pod runner runs agent pods in the host's network: this plan's
	// archiver must be gone before the next test's starts, or that one's
	// probe on the same port would be answered by this one (a namespace's
	// deletion takes its pods later). Point-in-time off, its pods gone.
	t.Cleanup(func() {
		g := NewWithT(t)
		g.Eventually(func() error {
			cur := &platformv1.ProtectionPlan{}
			if err := env.Client.Get(ctx, client.ObjectKeyFromObject(plan), cur); err != nil {
				return err
			}
			cur.Spec.Backup.PointInTime = nil
			return env.Client.Update(ctx, cur)
		}).WithTimeout(30 * time.Second).Should(Succeed())
		archiverPodsGone(t, ns)
	})
	bj := &backupv1.BackupJob{}
	bj.Namespace, bj.Name = ns, plan.Name
	g.Eventually(func() error { return env.Client.Get(ctx, client.ObjectKeyFromObject(bj), bj) }).WithTimeout(time.Minute).Should(Succeed())
	waitPointInTimeReady(t, bj)

	created := time.Now()
	fixtures.SetRunNow(g, env.Client, bj, "first")
	// The writer starts as soon as the base is stored, before its Job is
	// complete: the first drill's target is the second after the backup's
	// recorded success, and a writer started once the test saw that
	// success (a status write and a poll later) wrote its first row after
	// the target under load — 0 rows replayed.
	stored := func() []string {
		var out []string
		for _, a := range artifacts(t, bj) {
			if !strings.Contains(a, "/_binlog/") {
				out = append(out, a)
			}
		}
		return out
	}
	g.Eventually(stored).WithTimeout(3 * time.Minute).WithPolling(100 * time.Millisecond).ShouldNot(BeEmpty())

	// A writer: a row now and every 300 ms after the base, until stopped.
	stopWriter := make(chan struct{})
	var wg sync.WaitGroup
	var lastWrite time.Time
	wg.Add(1)
	go func() {
		defer wg.Done()
		for i := 1; ; i++ {
			if _, err := e.sql.SQL(src, fmt.Sprintf("INSERT INTO orders VALUES (%d, 1, 1.00, 'new', NOW())", 100000+i)); err != nil {
				t.Errorf("writer: %v", err)
				return
			}
			lastWrite = time.Now()
			select {
			case <-stopWriter:
				return
			case <-time.After(300 * time.Millisecond):
			}
		}
	}()
	stop := sync.OnceFunc(func() { close(stopWriter); wg.Wait() })
	t.Cleanup(stop)
	st1 := waitSucceeded(t, bj, created, 3*time.Minute)
	g.Expect(stored()).To(ConsistOf(st1.LastArtifact.Path), "the base the writer waited for is the run's artifact")

	verified := func(n int32, base string) *platformv1.ProtectionPlan {
		t.Helper()
		var p *platformv1.ProtectionPlan
		g.Eventually(func(g Gomega) {
			p = getPlan(g, plan)
			lv := p.Status.LastVerification
			g.Expect(p.Status.Verifications).To(BeNumerically(">=", n))
			g.Expect(lv).NotTo(BeNil())
			g.Expect(lv.Result).NotTo(BeElementOf(platformv1.VerificationPending, platformv1.VerificationRunning, platformv1.VerificationResult("")),
				"verification %d: %s", p.Status.Verifications, lv.RestoreJob)
		}).WithTimeout(5 * time.Minute).WithPolling(time.Second).Should(Succeed())
		lv := p.Status.LastVerification
		c := conditions.Get(p, platformv1.RecoverabilityVerifiedCondition)
		g.Expect(c).NotTo(BeNil())
		g.Expect(lv.Result).To(Equal(platformv1.VerificationSucceeded), "%s: %s (%+v)", c.Reason, c.Message, lv)
		g.Expect(c.Status).To(Equal(metav1.ConditionTrue), "%s: %s", c.Reason, c.Message)
		g.Expect(lv.TargetTime).NotTo(BeNil(), "a point-in-time drill names its target")
		g.Expect(lv.RecoveryPointReached).NotTo(BeNil())
		g.Expect(lv.RecoveryPointReached.UTC()).To(Equal(lv.TargetTime.UTC()), "the drill reached its target second")
		g.Expect(lv.Artifact.Path).To(Equal(base), "the drill replays from the newest base before its target")
		return p
	}

	// With the writer running: the drill at now − maxLag, checked.
	p := verified(1, st1.LastArtifact.Path)
	lv := p.Status.LastVerification
	g.Expect(lv.TargetTime.Time).To(BeTemporally(">=", st1.LastSuccessfulTime.Time.Truncate(time.Second)), "never before the newest backup")
	g.Expect(p.Status.RPO).NotTo(BeNil())
	g.Expect(p.Status.RPO.Basis).To(Equal(platformv1.RPOBasisPointInTime), "%s", p.Status.RPO.Message)
	g.Expect(p.Status.RPO.MaxLag.Duration).To(Equal(maxLag))
	t.Logf("drill 1 (writer running): target %s reached, base %s", lv.TargetTime.UTC().Format(time.RFC3339), lv.Artifact.Path)

	// Idle: the writer stops; the drill's own writes (the scratch
	// database) are the server's last. A proof of quiet stored after them
	// says the archive holds everything; a backup now is taken on an idle
	// server, in a binary log file nothing fills.
	stop()
	idleFrom := time.Now()
	g.Expect(lastWrite).NotTo(BeZero(), "the writer wrote")
	covered := path.Join(ns, "_binlog", ns, bj.Name, "covered")
	g.Eventually(func(g Gomega) time.Time {
		obj, err := env.Servers.S3.Client().GetObject(ctx, install.Bucket, covered, minio.GetObjectOptions{})
		g.Expect(err).NotTo(HaveOccurred())
		defer obj.Close()
		b, err := io.ReadAll(obj)
		g.Expect(err).NotTo(HaveOccurred(), "the archive's proof of quiet %s", covered)
		var c struct {
			At time.Time `json:"at"`
		}
		g.Expect(json.Unmarshal(b, &c)).To(Succeed())
		return c.At
	}).WithTimeout(2*time.Minute).WithPolling(time.Second).Should(BeTemporally(">", idleFrom), "a proof of quiet after the last write")
	again := time.Now()
	fixtures.SetRunNow(g, env.Client, bj, "idle")
	st2 := waitSucceeded(t, bj, again, 3*time.Minute)
	p = verified(2, st2.LastArtifact.Path)
	lv = p.Status.LastVerification
	g.Expect(lv.TargetTime.Time).To(BeTemporally(">", lastWrite), "the idle drill's target is after every write")
	t.Logf("drill 2 (idle since %s): target %s reached, base %s", idleFrom.UTC().Format(time.RFC3339), lv.TargetTime.UTC().Format(time.RFC3339), lv.Artifact.Path)
}
