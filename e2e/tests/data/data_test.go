package data_test

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
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

// Retention prunes real artifacts across runs and keeps the newest: two
// backups are made, their index entries aged by three days (the store's
// manifests rewritten, the artifacts renamed; their bytes stay the real
// ones), and the next run, with retentionDays 1, deletes both and keeps its
// own.
func TestRetentionPrunesOldArtifactsKeepsNewest(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	e := postgres()
	ns := namespace(t, e)
	src := dbName(ns, "shop")
	g.Expect(e.seed(src, 300)).To(Succeed())
	bj := backupJob(ns, "shop", e, src, fixtures.Yearly, pvcStorage(t, ns, "backups"))
	bj.Spec.RetentionDays = 1
	g.Expect(env.Client.Create(ctx, bj)).To(Succeed())
	var old []string
	for _, id := range []string{"one", "two"} {
		before := time.Now()
		fixtures.SetRunNow(g, env.Client, bj, id)
		old = append(old, waitSucceeded(t, bj, before, 2*time.Minute).LastArtifact.Path)
	}
	g.Expect(artifacts(t, bj)).To(ConsistOf(old), "two runs, two artifacts, none pruned yet")

	ageCatalog(t, bj, 72*time.Hour)
	aged := artifacts(t, bj)
	g.Expect(aged).To(HaveLen(2))
	before := time.Now()
	fixtures.SetRunNow(g, env.Client, bj, "three")
	newest := waitSucceeded(t, bj, before, 2*time.Minute).LastArtifact.Path
	g.Expect(artifacts(t, bj)).To(ConsistOf(newest), "the artifacts older than retentionDays (%v) are deleted, the newest kept", aged)
	g.Expect(stored(t, bj, newest)).NotTo(BeEmpty())
}

// ageCatalog moves every backup of bj (in its PVC) back by d: the times in
// its index entry and the timestamp in its name, with the artifact file
// renamed to match (the agent checks that an entry's start is its name's).
// The bytes stay what the real backup wrote. Agents keep the index as one
// manifest per artifact (<job>/entries/<artifact>.json); older ones as one
// catalog.json: both are handled.
func ageCatalog(t *testing.T, bj *backupv1.BackupJob, d time.Duration) {
	t.Helper()
	dir := pvcPath(bj, filepath.Join(bj.Namespace, bj.Name))
	manifests, _ := filepath.Glob(filepath.Join(dir, "entries", "*.json"))
	if len(manifests) > 0 {
		for _, m := range manifests {
			var en map[string]any
			readJSON(t, m, &en)
			renamed := ageEntry(t, dir, en, d)
			writeJSON(t, filepath.Join(dir, "entries", renamed+".json"), en)
			if err := os.Remove(m); err != nil {
				t.Fatal(err)
			}
		}
		return
	}
	path := filepath.Join(dir, "catalog.json")
	var cat map[string]any
	readJSON(t, path, &cat)
	entries, _ := cat["entries"].([]any)
	if len(entries) == 0 {
		t.Fatalf("no manifest in %s/entries and no entry in %s", dir, path)
	}
	for _, x := range entries {
		ageEntry(t, dir, x.(map[string]any), d)
	}
	writeJSON(t, path, cat)
}

// ageEntry moves one index entry (and its artifact file in dir) back by d
// and returns its new name.
func ageEntry(t *testing.T, dir string, en map[string]any, d time.Duration) string {
	t.Helper()
	const layout = "20060102T150405.000Z" // the agent's artifact timestamp (agent/internal/naming.TimeLayout)
	start, err := time.Parse(time.RFC3339Nano, en["start"].(string))
	if err != nil {
		t.Fatal(err)
	}
	name := en["name"].(string)
	renamed := strings.Replace(name, start.UTC().Format(layout), start.Add(-d).UTC().Format(layout), 1)
	if renamed == name {
		t.Fatalf("index entry %s: no timestamp %s in its name", name, start.UTC().Format(layout))
	}
	if err := os.Rename(filepath.Join(dir, name), filepath.Join(dir, renamed)); err != nil {
		t.Fatal(err)
	}
	en["name"] = renamed
	for _, k := range []string{"start", "end"} {
		at, err := time.Parse(time.RFC3339Nano, en[k].(string))
		if err != nil {
			t.Fatal(err)
		}
		en[k] = at.Add(-d).Format(time.RFC3339Nano)
	}
	return renamed
}

func readJSON(t *testing.T, path string, v any) {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, v); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
}

func writeJSON(t *testing.T, path string, v any) {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, b, 0o644); err != nil {
		t.Fatal(err)
	}
}
