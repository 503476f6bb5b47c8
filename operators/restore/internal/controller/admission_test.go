package controller_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	backupv1 "cairn.dev/apis/backup/v1"
	cairnv1 "cairn.dev/apis/meta/v1"
	restorev1 "cairn.dev/apis/restore/v1"
	"cairn.dev/libs/testing/testenv"
)

// Each bad input is rejected at admission — by the CRD schema and its CEL
// rules, or by the validating webhook — with a message that names the field.
func TestBadInputIsRejected(t *testing.T) {
	startOperator(t, operatorOptions{})
	ns := namespace(t)
	last := artifactOf("orders-db", "20260102T030405.123Z")
	createBackupJob(t, ns, "orders-db", sourceDB(), &last)
	store := func() *restorev1.StoreSource {
		return &restorev1.StoreSource{Storage: s3Storage(), BackupJob: "shop/orders-db", Artifact: "shop_orders-db_20260102T030405.123Z.pgdump.zst"}
	}

	cases := []testenv.Refusal[*restorev1.RestoreJob]{
		{Name: "both sources", Mutate: func(rj *restorev1.RestoreJob) { rj.Spec.Source.Store = store() },
			Want: "source: set exactly one of backupJob or store"},
		{Name: "no source", Mutate: func(rj *restorev1.RestoreJob) { rj.Spec.Source.BackupJob = nil },
			Want: "source: set exactly one of backupJob or store"},
		{Name: "malformed BackupJob name", Mutate: func(rj *restorev1.RestoreJob) { rj.Spec.Source.BackupJob.Name = "Orders_DB" },
			Want: "spec.source.backupJob.name"},
		{Name: "artifact escaping the store", Mutate: func(rj *restorev1.RestoreJob) { rj.Spec.Source.BackupJob.Artifact = "../../etc/passwd" },
			Want: `artifact: use a name or relative path without ".."`},
		{Name: "store without artifact", Mutate: func(rj *restorev1.RestoreJob) {
			rj.Spec.Source = restorev1.RestoreSource{Store: store()}
			rj.Spec.Source.Store.Artifact = ""
		}, Want: "spec.source.store.artifact"},
		{Name: "catalog key without namespace", Mutate: func(rj *restorev1.RestoreJob) {
			rj.Spec.Source = restorev1.RestoreSource{Store: store()}
			rj.Spec.Source.Store.BackupJob = "orders-db"
		}, Want: "spec.source.store.backupJob"},
		{Name: "store with both pvc and s3", Mutate: func(rj *restorev1.RestoreJob) {
			rj.Spec.Source = restorev1.RestoreSource{Store: store()}
			rj.Spec.Source.Store.Storage.PVC = &cairnv1.PVCStorage{ClaimName: "backups"}
		}, Want: "storage: set exactly one of pvc or s3"},
		{Name: "S3 endpoint with a path", Mutate: func(rj *restorev1.RestoreJob) {
			rj.Spec.Source = restorev1.RestoreSource{Store: store()}
			rj.Spec.Source.Store.Storage.S3.Endpoint = "https://s3.example.com/cairn-backups"
		}, Want: "spec.source.store.storage.s3.endpoint"},
		{Name: "port in the host", Mutate: func(rj *restorev1.RestoreJob) { rj.Spec.Target.Host = "scratch-db:5432" },
			Want: "set the port in spec.target.port"},
		{Name: "malformed credentials Secret name", Mutate: func(rj *restorev1.RestoreJob) { rj.Spec.Target.CredentialsSecretRef.Name = "Scratch Credentials" },
			Want: "spec.target.credentialsSecretRef.name"},
		{Name: "unknown engine", Mutate: func(rj *restorev1.RestoreJob) { rj.Spec.Target.Engine = "oracle" },
			Want: "spec.target.engine"},
		{Name: "deadline below a minute", Mutate: func(rj *restorev1.RestoreJob) { rj.Spec.ActiveDeadlineSeconds = new(int64(10)) },
			Want: "activeDeadlineSeconds: must be at least 60"},
		{Name: "too many retries", Mutate: func(rj *restorev1.RestoreJob) { rj.Spec.MaxRetries = new(int32(50)) },
			Want: "spec.maxRetries"},
		{Name: "check running a shell", Mutate: func(rj *restorev1.RestoreJob) {
			rj.Spec.Checks = []restorev1.Check{{Name: "env", SQL: `\! cat /proc/1/environ`, Equals: new("x")}}
		}, Want: "spec.checks[0].sql"},
		{Name: "check with a second statement", Mutate: func(rj *restorev1.RestoreJob) {
			rj.Spec.Checks = []restorev1.Check{{Name: "ok", RowCountsMatchBackup: true},
				{Name: "rw", SQL: "SET transaction_read_only = off; DELETE FROM orders", AtLeast: new(int64(0))}}
		}, Want: "spec.checks[1].sql"},
		{Name: "name too long for its Job", Mutate: func(rj *restorev1.RestoreJob) { rj.Name = strings.Repeat("a", 56) },
			Want: "metadata.name: at most 55 characters"},
		{Name: "target is the source's database", Mutate: func(rj *restorev1.RestoreJob) { rj.Spec.Target = sourceDB() },
			Want: "restoring would overwrite it; restore into another database, or set spec.allowOverwriteSource: true"},
		{Name: "target is the source's database, under another name", Mutate: func(rj *restorev1.RestoreJob) {
			rj.Spec.Target = sourceDB()
			rj.Spec.Target.Host, rj.Spec.Target.Port = "ORDERS-DB.shop", 0
		}, Want: "restoring would overwrite it"},
		{Name: "target is the store's BackupJob's database", Mutate: func(rj *restorev1.RestoreJob) {
			rj.Spec.Source = restorev1.RestoreSource{Store: store()}
			rj.Spec.Source.Store.BackupJob = ns + "/orders-db"
			rj.Spec.Target = sourceDB()
		}, Want: "restoring would overwrite it"},
	}
	testenv.CheckRefused(t, env.Client, func() *restorev1.RestoreJob { return restoreJob(ns, "bad", fromBackupJob("orders-db", "")) }, cases)
}

// What is legal is admitted, with a warning where it may surprise.
func TestAdmittedWithWarnings(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	startOperator(t, operatorOptions{})
	ns := namespace(t)
	c, warnings := env.WarningClient(t, nil)
	last := artifactOf("orders-db", "20260102T030405.123Z")
	createBackupJob(t, ns, "orders-db", sourceDB(), &last)

	overwrite := restoreJob(ns, "on-purpose", fromBackupJob("orders-db", ""))
	overwrite.Spec.Target = sourceDB()
	overwrite.Spec.AllowOverwriteSource = true
	g.Expect(c.Create(ctx, overwrite)).To(Succeed())
	g.Expect(warnings.Take()).To(ContainElement(ContainSubstring("overwrites the database its source BackupJob backs up")))

	early := restoreJob(ns, "early", fromBackupJob("not-yet", ""))
	g.Expect(c.Create(ctx, early)).To(Succeed())
	g.Expect(warnings.Take()).To(ContainElement(ContainSubstring("BackupJob not-yet not found")))

	plain := restoreJob(ns, "plain", fromBackupJob("orders-db", ""))
	g.Expect(c.Create(ctx, plain)).To(Succeed())
	g.Expect(warnings.Take()).To(BeEmpty())
	// Set values are kept, not defaulted over.
	kept := restoreJob(ns, "kept", fromBackupJob("orders-db", ""))
	kept.Spec.MaxRetries, kept.Spec.ActiveDeadlineSeconds, kept.Spec.Target.Port = new(int32(0)), new(int64(120)), 6543
	g.Expect(c.Create(ctx, kept)).To(Succeed())
	g.Expect(*kept.Spec.MaxRetries).To(Equal(int32(0)))
	g.Expect(*kept.Spec.ActiveDeadlineSeconds).To(Equal(int64(120)))
	g.Expect(kept.Spec.Target.Port).To(Equal(int32(6543)))
}

// The spec cannot change after creation; metadata can.
func TestSpecIsImmutable(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	startOperator(t, operatorOptions{})
	ns := namespace(t)
	rj := restoreJob(ns, "fixed", fromBackupJob("orders-db", ""))
	g.Expect(env.Client.Create(ctx, rj)).To(Succeed())

	for name, mutate := range map[string]func(*restorev1.RestoreJob){
		"target database": func(rj *restorev1.RestoreJob) { rj.Spec.Target.Database = "elsewhere" },
		"source":          func(rj *restorev1.RestoreJob) { rj.Spec.Source.BackupJob.Artifact = "x.pgdump.zst" },
		"allow overwrite": func(rj *restorev1.RestoreJob) { rj.Spec.AllowOverwriteSource = true },
	} {
		// The operator writes status meanwhile: retry a conflict, so what
		// is asserted is the webhook's answer.
		var err error
		g.Eventually(func() bool {
			cur := current(g, rj)
			mutate(cur)
			err = env.Client.Update(ctx, cur)
			return !apierrors.IsConflict(err)
		}).WithTimeout(timeout).Should(BeTrue(), name)
		g.Expect(err).To(HaveOccurred(), name)
		g.Expect(err.Error()).To(ContainSubstring("spec is immutable: create a new RestoreJob"), name)
	}
	g.Eventually(func() error {
		cur := &restorev1.RestoreJob{}
		if err := env.Client.Get(ctx, client.ObjectKeyFromObject(rj), cur); err != nil {
			return err
		}
		cur.Labels = map[string]string{"team": "shop"}
		return env.Client.Update(ctx, cur)
	}).WithTimeout(timeout).Should(Succeed())
}

// The shipped sample RestoreJob is admitted next to the sample BackupJob it
// names, and restores that BackupJob's newest artifact.
func TestSampleRestoreJob(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	startOperator(t, operatorOptions{})
	root, err := testenv.RepoRoot()
	g.Expect(err).NotTo(HaveOccurred())
	read := func(name string, into client.Object) {
		raw, err := os.ReadFile(filepath.Join(root, "platform", "samples", name))
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(yaml.UnmarshalStrict(raw, into)).To(Succeed())
	}
	bj := &backupv1.BackupJob{}
	read("backupjob.yaml", bj)
	rj := &restorev1.RestoreJob{}
	read("restorejob.yaml", rj)
	g.Expect(rj.Spec.Source.BackupJob).NotTo(BeNil())
	g.Expect(rj.Spec.Source.BackupJob.Name).To(Equal(bj.Name))
	g.Expect(rj.Namespace).To(Equal(bj.Namespace))

	// The sample Secrets they name (secrets.yaml) exist first.
	raw, err := os.ReadFile(filepath.Join(root, "platform", "samples", "secrets.yaml"))
	g.Expect(err).NotTo(HaveOccurred())
	for _, doc := range strings.Split(string(raw), "\n---") {
		s := &corev1.Secret{}
		g.Expect(yaml.Unmarshal([]byte(doc), s)).To(Succeed())
		if err := env.Client.Create(ctx, s); err != nil && !apierrors.IsAlreadyExists(err) {
			t.Fatal(err)
		}
	}
	g.Expect(env.Client.Create(ctx, bj)).To(Succeed())
	t.Cleanup(func() { _ = env.Client.Delete(context.Background(), bj) })
	last := artifactOf(bj.Name, "20260102T020000.000Z")
	setLastArtifact(t, bj, last)
	g.Expect(env.Client.Create(ctx, rj)).To(Succeed())
	t.Cleanup(func() { _ = env.Client.Delete(context.Background(), rj) })
	job := waitForJob(t, rj)
	g.Expect(envOf(job, "CAIRN_ARTIFACT")).To(Equal(last.Path))
	g.Expect(envOf(job, "CAIRN_STORE")).To(Equal("s3"))
}
