package data_test

import (
	"bytes"
	"context"
	"strings"
	"testing"
	"time"

	"github.com/minio/minio-go/v7"
	. "github.com/onsi/gomega"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"

	backupv1 "cairn.dev/apis/backup/v1"
	restorev1 "cairn.dev/apis/restore/v1"
	"cairn.dev/e2e/fixtures"
)

const orders = 2000

// A BackupJob on a schedule (every minute, Asia/Shanghai) runs the agent
// image against the real database and stores a real artifact; a RestoreJob
// from it restores into a new database whose tables equal the source's, row
// for row. PostgreSQL to S3, MariaDB to a PVC.
func TestScheduledBackupThenRestore(t *testing.T) {
	for _, tc := range []struct {
		name    string
		engine  func() engine
		storage string
	}{
		{"postgres-s3", postgres, "s3"},
		{"mariadb-pvc", mariadb, "pvc"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			g := NewWithT(t)
			ctx := context.Background()
			e := tc.engine()
			ns := namespace(t, e)
			src, dst := dbName(ns, "shop"), dbName(ns, "shop_restored")
			g.Expect(e.seed(src, orders)).To(Succeed())
			want, err := e.tables(src)
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(want).To(HaveLen(3))
			g.Expect(want).To(ContainElement(HaveField("Rows", BeEquivalentTo(orders))), "orders seeded")

			storage := s3Storage(ns)
			if tc.storage == "pvc" {
				storage = pvcStorage(t, ns, "backups")
			}
			bj := backupJob(ns, "shop", e, src, "* * * * *", storage)
			created := time.Now()
			g.Expect(env.Client.Create(ctx, bj)).To(Succeed())
			st := waitSucceeded(t, bj, created, 3*time.Minute)
			t.Logf("scheduled backup recorded %s after the BackupJob was created: %s (%d bytes, %s)",
				time.Since(created).Round(time.Second), st.LastArtifact.Path, st.LastArtifact.Size, st.LastArtifact.Checksum)
			g.Expect(fixtures.Jobs(g, env.Client, bj, client.MatchingLabels{"backup.cairn.dev/run": "scheduled"})).NotTo(BeEmpty(),
				"the CronJob's scheduled run made the backup")
			// No more runs while the restore is checked.
			suspend := fixtures.Get(g, env.Client, bj)
			patch := client.MergeFrom(suspend.DeepCopy())
			suspend.Spec.Suspend = true
			g.Expect(env.Client.Patch(ctx, suspend, patch)).To(Succeed())

			// The artifact is in the store, with the size and checksum reported.
			b := stored(t, bj, st.LastArtifact.Path)
			g.Expect(int64(len(b))).To(Equal(st.LastArtifact.Size))
			g.Expect(sha256sum(b)).To(Equal(st.LastArtifact.Checksum))

			rj := restoreJob(bj, "restore", e, dst, "")
			g.Expect(env.Client.Create(ctx, rj)).To(Succeed())
			rj = waitRestore(t, rj, 3*time.Minute)
			g.Expect(rj.Status.Phase).To(Equal(restorev1.PhaseSucceeded), "restore: %s", lastMessage(rj.Status.Conditions))
			g.Expect(rj.Status.Artifact).NotTo(BeNil())

			got, err := e.tables(dst)
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(got).To(Equal(want), "restored tables equal the source (rows and content checksum)")
			for i := range want {
				t.Logf("%-12s source %6d rows %s | restored %6d rows %s", want[i].Name, want[i].Rows, want[i].Checksum, got[i].Rows, got[i].Checksum)
			}
		})
	}
}

// A corrupted artifact in the store makes the RestoreJob fail at
// verification, without retries, and the target database is never created.
func TestCorruptedArtifactFailsBeforeTouchingTarget(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	e := postgres()
	ns := namespace(t, e)
	src, dst := dbName(ns, "shop"), dbName(ns, "shop_never")
	g.Expect(e.seed(src, 500)).To(Succeed())
	bj := backupJob(ns, "shop", e, src, fixtures.Yearly, s3Storage(ns))
	g.Expect(env.Client.Create(ctx, bj)).To(Succeed())
	created := time.Now()
	fixtures.SetRunNow(g, env.Client, bj, "first")
	st := waitSucceeded(t, bj, created, 2*time.Minute)

	// Flip one byte in the middle of the stored artifact.
	b := stored(t, bj, st.LastArtifact.Path)
	b[len(b)/2] ^= 0xff
	_, err := env.Servers.S3.Client().PutObject(ctx, bj.Spec.Storage.S3.Bucket, st.LastArtifact.Path, bytes.NewReader(b), int64(len(b)), minio.PutObjectOptions{})
	g.Expect(err).NotTo(HaveOccurred())

	rj := restoreJob(bj, "restore-corrupt", e, dst, "")
	g.Expect(env.Client.Create(ctx, rj)).To(Succeed())
	rj = waitRestore(t, rj, 3*time.Minute)
	g.Expect(rj.Status.Phase).To(Equal(restorev1.PhaseFailed))
	msg := strings.ToLower(lastMessage(rj.Status.Conditions))
	g.Expect(msg).To(Or(ContainSubstring("checksum"), ContainSubstring("corrupt")), "the failure names the verification: %s", msg)
	exists, err := e.exists(dst)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(exists).To(BeFalse(), "the target database was created by a restore that failed verification")

	job := &batchv1.Job{}
	g.Expect(env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: rj.Status.JobName}, job)).To(Succeed())
	g.Expect(job.Status.Failed).To(BeEquivalentTo(1), "a corrupted artifact is not retried (podFailurePolicy)")
}

// deletionPolicy Delete: deleting the BackupJob removes its real artifacts
// from the store.
func TestDeletionPolicyDeleteRemovesArtifacts(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	e := mariadb()
	ns := namespace(t, e)
	src := dbName(ns, "shop")
	g.Expect(e.seed(src, 200)).To(Succeed())
	bj := backupJob(ns, "shop", e, src, fixtures.Yearly, s3Storage(ns))
	bj.Spec.DeletionPolicy = backupv1.DeletionPolicyDelete
	g.Expect(env.Client.Create(ctx, bj)).To(Succeed())
	for _, id := range []string{"one", "two"} {
		before := time.Now()
		fixtures.SetRunNow(g, env.Client, bj, id)
		waitSucceeded(t, bj, before, 2*time.Minute)
	}
	g.Expect(artifacts(t, bj)).To(HaveLen(2), "two runs, two artifacts")

	g.Expect(env.Client.Delete(ctx, bj)).To(Succeed())
	g.Eventually(func() bool {
		return apierrors.IsNotFound(env.Client.Get(ctx, client.ObjectKeyFromObject(bj), &backupv1.BackupJob{}))
	}).WithTimeout(3 * time.Minute).WithPolling(time.Second).Should(BeTrue())
	g.Expect(artifacts(t, bj)).To(BeEmpty(), "deletionPolicy Delete leaves no artifact in the store")
}

// A BackupJob whose credentials Secret does not exist is reported as such
// on the BackupJob, and no agent container runs.
func TestMissingCredentialsSecretIsReported(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	e := postgres()
	ns := namespace(t, e)
	bj := backupJob(ns, "no-secret", e, dbName(ns, "shop"), fixtures.Yearly, s3Storage(ns))
	bj.Spec.Database.CredentialsSecretRef.Name = "missing-credentials"
	g.Expect(env.Client.Create(ctx, bj)).To(Succeed())
	fixtures.SetRunNow(g, env.Client, bj, "now")
	g.Eventually(func(g Gomega) {
		st := fixtures.Get(g, env.Client, bj).Status
		g.Expect(lastMessage(st.Conditions)).To(ContainSubstring("missing-credentials"))
	}).WithTimeout(time.Minute).WithPolling(time.Second).Should(Succeed(), "the BackupJob reports the missing Secret")

	pods := &corev1.PodList{}
	g.Expect(env.Client.List(ctx, pods, client.InNamespace(ns))).To(Succeed())
	for _, p := range pods.Items {
		for _, cs := range p.Status.ContainerStatuses {
			g.Expect(cs.State.Running).To(BeNil(), "pod %s ran without its Secret", p.Name)
			g.Expect(cs.State.Terminated).To(BeNil(), "pod %s ran without its Secret", p.Name)
		}
	}
}
