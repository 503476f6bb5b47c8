package data_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/minio/minio-go/v7"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	backupv1 "cairn.dev/apis/backup/v1"
	cairnv1 "cairn.dev/apis/meta/v1"
	platformv1 "cairn.dev/apis/platform/v1"
	"cairn.dev/e2e/fixtures"
	"cairn.dev/e2e/install"
)

// Issue 30: deleting a namespace keeps deletionPolicy's promise, on both
// store kinds. A namespace holds two BackupJobs — one of its own, one owned
// by a ProtectionPlan — with two artifacts each, on the real S3 server
// (versitygw) or on one claim bound to a volume (the pod runner's folder
// for it). With Delete the namespace is gone within a minute and the store
// holds none of their artifacts or catalog entries: the deletes ran in the
// operator's namespace (the tenant's refuses new Jobs), with the S3
// credentials handed over, or on the claim's volume bound for it to a claim
// of the operator's namespace and bound back to the tenant's claim after;
// with Retain they all stay.
func TestNamespaceDeletionKeepsDeletionPolicy(t *testing.T) {
	for _, kind := range []string{"s3", "pvc"} {
		for _, policy := range []backupv1.DeletionPolicy{backupv1.DeletionPolicyDelete, backupv1.DeletionPolicyRetain} {
			t.Run(kind+"/"+string(policy), func(t *testing.T) { namespaceDeletion(t, kind, policy) })
		}
	}
}

func namespaceDeletion(t *testing.T, kind string, policy backupv1.DeletionPolicy) {
	g := NewWithT(t)
	ctx := context.Background()
	e := mariadb()
	ns := namespace(t, e)
	src := dbName(ns, "shop")
	g.Expect(e.seed(src, 100)).To(Succeed())
	ownStorage, planStorage := s3Storage(ns+"/orders"), s3Storage(ns+"/plan")
	// stored lists what the namespace's BackupJobs keep in the store.
	stored := func() []string { return objectsUnder(t, ns+"/") }
	if kind == "pvc" {
		ownStorage = pvcStorage(t, ns, "backups")
		planStorage = ownStorage
		stored = func() []string {
			return filesUnder(t, filepath.Join(env.Cluster.Pods.VolumeDir(ns+"-backups"), "cairn", ns))
		}
	}
	own := backupJob(ns, "orders", e, src, fixtures.Yearly, ownStorage)
	own.Spec.DeletionPolicy = policy
	g.Expect(env.Client.Create(ctx, own)).To(Succeed())
	plan := yearlyPlan(ns, e, src, planStorage, policy)
	g.Expect(env.Client.Create(ctx, plan)).To(Succeed())
	owned := &backupv1.BackupJob{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: plan.Name}}
	for _, bj := range []*backupv1.BackupJob{own, owned} {
		g.Eventually(func() error { return env.Client.Get(ctx, client.ObjectKeyFromObject(bj), &backupv1.BackupJob{}) }).
			WithTimeout(time.Minute).Should(Succeed())
		for _, id := range []string{"one", "two"} {
			before := time.Now()
			fixtures.SetRunNow(g, env.Client, bj, id)
			waitSucceeded(t, bj, before, 2*time.Minute)
		}
	}
	before := stored()
	for _, name := range []string{own.Name, owned.Name} {
		dumps := 0
		for _, k := range before {
			if strings.Contains(k, name+"/") && !strings.HasSuffix(k, ".json") {
				dumps++
			}
		}
		g.Expect(dumps).To(Equal(2), "artifacts of %s in %v", name, before)
	}

	start := time.Now()
	g.Expect(env.Client.Delete(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}})).To(Succeed())
	g.Eventually(func() bool {
		return apierrors.IsNotFound(env.Client.Get(ctx, client.ObjectKey{Name: ns}, &corev1.Namespace{}))
	}).WithTimeout(time.Minute).WithPolling(time.Second).Should(BeTrue(), "the namespace is gone within a minute")
	t.Logf("namespace %s (%s, %s) gone %s after the delete", ns, kind, policy, time.Since(start).Round(time.Second))
	if policy == backupv1.DeletionPolicyDelete {
		g.Expect(stored()).To(BeEmpty(), "no artifact or catalog entry of the deleted namespace is left")
	} else {
		g.Expect(stored()).To(ConsistOf(before), "Retain keeps every artifact and catalog entry")
	}
	switch kind {
	case "s3":
		// The handed-over credentials are gone with the delete.
		sec := &corev1.Secret{}
		g.Expect(env.Client.Get(ctx, client.ObjectKey{Namespace: "cairn-system", Name: "cairn-backup-delete-credentials"}, sec)).To(Succeed())
		g.Expect(sec.Data).To(BeEmpty())
	case "pvc":
		// The volume is the tenant claim's again (Released now: its
		// reclaim policy is Retain), and the operator's claim is gone.
		pv := &corev1.PersistentVolume{}
		g.Expect(env.Client.Get(ctx, client.ObjectKey{Name: ns + "-backups"}, pv)).To(Succeed())
		g.Expect(pv.Annotations).NotTo(HaveKey("backup.cairn.dev/claim-of"))
		g.Expect(pv.Spec.ClaimRef.Namespace).To(Equal(ns))
		g.Expect(pv.Spec.ClaimRef.Name).To(Equal("backups"))
		g.Eventually(func(g Gomega) {
			list := &corev1.PersistentVolumeClaimList{}
			g.Expect(env.Client.List(ctx, list, client.InNamespace("cairn-system"))).To(Succeed())
			for _, c := range list.Items {
				g.Expect(c.Spec.VolumeName).NotTo(Equal(pv.Name), "the operator's claim for the volume is still there")
			}
		}).WithTimeout(30 * time.Second).Should(Succeed())
	}
}

// filesUnder lists the files (not folders) under dir, relative to it.
func filesUnder(t *testing.T, dir string) []string {
	t.Helper()
	var out []string
	err := filepath.WalkDir(dir, func(p string, d os.DirEntry, err error) error {
		if err != nil {
			if os.IsNotExist(err) {
				return nil
			}
			return err
		}
		if !d.IsDir() {
			rel, _ := filepath.Rel(dir, p)
			out = append(out, rel)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// The store is down when the namespace is deleted: the delete (in the
// operator's namespace) cannot reach it, so at the cleanup deadline (here
// 40s: a backup operator started with --cleanup-deadline) the finalizer
// goes, the namespace with it, and a Warning Event on the Namespace names
// what was left and where.
func TestNamespaceDeletionStoreDownDeadline(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	restart := withBackupOperator(t, "--cleanup-deadline=40s")
	defer restart()
	e := postgres()
	ns := namespace(t, e)
	down := s3Storage(ns + "/down")
	down.S3.Endpoint = "127.0.0.1:1" // nothing listens
	bj := backupJob(ns, "orders", e, dbName(ns, "shop"), fixtures.Yearly, down)
	bj.Spec.DeletionPolicy = backupv1.DeletionPolicyDelete
	g.Expect(env.Client.Create(ctx, bj)).To(Succeed())
	g.Eventually(func(g Gomega) {
		sec := &corev1.Secret{}
		g.Expect(env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: "s3"}, sec)).To(Succeed())
		g.Expect(sec.Finalizers).To(ContainElement("backup.cairn.dev/artifact-delete"))
	}).WithTimeout(time.Minute).Should(Succeed())

	g.Expect(env.Client.Delete(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}})).To(Succeed())
	g.Eventually(func() bool {
		return apierrors.IsNotFound(env.Client.Get(ctx, client.ObjectKey{Name: ns}, &corev1.Namespace{}))
	}).WithTimeout(3*time.Minute).WithPolling(time.Second).Should(BeTrue(), "the namespace goes at the cleanup deadline")
	g.Eventually(func(g Gomega) {
		g.Expect(namespaceEvents(g, ns, "CleanupDeadlineExceeded")).To(ContainElement(And(
			ContainSubstring("BackupJob "+ns+"/orders"),
			ContainSubstring("s3://"+install.Bucket+"/"+ns+"/down (endpoint 127.0.0.1:1)"))))
	}).WithTimeout(30 * time.Second).Should(Succeed())
}

// yearlyPlan is a ProtectionPlan backing up src to storage, verifying
// only every thousandth backup (no restore runs here).
func yearlyPlan(ns string, e engine, src string, storage cairnv1.StorageSpec, policy backupv1.DeletionPolicy) *platformv1.ProtectionPlan {
	return &platformv1.ProtectionPlan{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "shop"},
		Spec: platformv1.ProtectionPlanSpec{
			Database: cairnv1.DatabaseRef{Engine: e.name, Host: "127.0.0.1", Port: int32(e.port), Database: src,
				CredentialsSecretRef: cairnv1.LocalObjectReference{Name: "db"}},
			TimeZone: "UTC",
			Backup:   platformv1.BackupTemplate{Schedule: fixtures.Yearly, RetentionDays: 7, Storage: storage},
			Verification: platformv1.VerificationSpec{
				EveryNBackups: ptr.To[int32](1000),
				RestoreInto: platformv1.ScratchDatabase{Host: "127.0.0.1", Port: int32(e.port), Database: src + "_verify",
					CredentialsSecretRef: cairnv1.LocalObjectReference{Name: "db"}},
			},
			Objectives:     platformv1.Objectives{RPO: metav1.Duration{Duration: 24 * 366 * time.Hour}},
			DeletionPolicy: policy,
		},
	}
}

// objectsUnder lists every object (artifacts and catalog) under prefix in
// the bucket.
func objectsUnder(t *testing.T, prefix string) []string {
	t.Helper()
	var out []string
	for obj := range env.Servers.S3.Client().ListObjects(context.Background(), install.Bucket, minio.ListObjectsOptions{Prefix: prefix, Recursive: true}) {
		if obj.Err != nil {
			t.Fatal(obj.Err)
		}
		out = append(out, obj.Key)
	}
	return out
}

// namespaceEvents are the notes of the Warning Events with reason about
// namespace ns (stored in "default": they outlive it).
func namespaceEvents(g Gomega, ns, reason string) []string {
	list := &eventsv1.EventList{}
	g.Expect(env.Client.List(context.Background(), list, client.InNamespace(metav1.NamespaceDefault))).To(Succeed())
	var notes []string
	for _, e := range list.Items {
		if e.Regarding.Kind == "Namespace" && e.Regarding.Name == ns && e.Reason == reason && e.Type == corev1.EventTypeWarning {
			notes = append(notes, e.Note)
		}
	}
	return notes
}

// withBackupOperator replaces the package's backup operator by one started
// with extra flags; the returned func puts a default one back.
func withBackupOperator(t *testing.T, extra ...string) func() {
	t.Helper()
	old := env.Operators["backup"]
	if err := old.Stop(); err != nil {
		t.Fatal(err)
	}
	suffix := fmt.Sprintf("-%d", time.Now().UnixNano())
	op, err := env.StartOperator(context.Background(), "backup", suffix, extra)
	if err != nil {
		t.Fatal(err)
	}
	env.Operators["backup"] = op
	return func() {
		if t.Failed() {
			t.Logf("--- %s log (last 60 lines)\n%s", op.Name, op.Tail(60))
		}
		_ = op.Stop()
		next, err := env.StartOperator(context.Background(), "backup", strings.Replace(suffix, "-", "-default-", 1), nil)
		if err != nil {
			t.Fatalf("starting a default backup operator again: %v", err)
		}
		env.Operators["backup"] = next
	}
}
