package migration_test

import (
	"bytes"
	"context"
	"io"
	"path"
	"strings"
	"testing"

	"github.com/minio/minio-go/v7"
	. "github.com/onsi/gomega"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"cairn.dev/agent/contract"
	cairnv1 "cairn.dev/apis/meta/v1"
	migrationv1 "cairn.dev/apis/migration/v1"
	"cairn.dev/e2e/install"
)

// A target row changed between copy and verify is caught: the verify
// step's pods are held (holdPods) until the copy has succeeded and the
// verify Job exists; the test then changes one row of the target's orders
// and lets the verify Job run. The migration ends Failed with Verified=False
// naming public.orders, status.verification lists it as the one mismatch
// (same row counts, content differs), and no cutover happened: the app
// Secret still points at the source.
func TestChangedTargetRowFailsVerification(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	d := engine(cairnv1.PostgresEngine)
	mj, want, dst := setup(t, g, d, 1000, migrationv1.TransferSpec{},
		migrationv1.CutoverSpec{Mode: migrationv1.CutoverAuto, WritersStopped: true, SwitchSecret: &cairnv1.LocalObjectReference{Name: "app-db"}})
	release := holdPods(t, g, env.Client, mj.Namespace, contract.StepVerify)
	g.Expect(env.Client.Create(ctx, mj)).To(Succeed())
	waitJob(g, env.Client, mj, mj.Namespace, contract.StepVerify)

	// Copied, and verification not started.
	cur := get(g, mj)
	g.Expect(cur.Status.Phase).To(Equal(migrationv1.PhaseVerifying))
	g.Expect(cur.Status.Step(contract.StepCopy)).NotTo(BeNil())
	g.Expect(cur.Status.Step(contract.StepCopy).Phase).To(Equal(migrationv1.StepSucceeded))
	got, err := d.tables(d.server, dst)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(got).To(Equal(want), "the copy is complete before the change")
	_, err = d.server.SQL(dst, "UPDATE orders SET amount = amount + 1 WHERE id = 7")
	g.Expect(err).NotTo(HaveOccurred())
	release()

	cur = waitDone(g, mj)
	g.Expect(cur.Status.Phase).To(Equal(migrationv1.PhaseFailed), "conditions: %+v", cur.Status.Conditions)
	cond := apimeta.FindStatusCondition(cur.Status.Conditions, migrationv1.VerifiedCondition)
	g.Expect(cond).NotTo(BeNil())
	g.Expect(cond.Status).To(Equal(metav1.ConditionFalse))
	g.Expect(cond.Reason).To(Equal(migrationv1.VerificationFailedReason))
	g.Expect(cond.Message).To(ContainSubstring("public.orders"))
	g.Expect(cond.Message).NotTo(ContainSubstring("customers"))
	v := cur.Status.Verification
	g.Expect(v).NotTo(BeNil())
	g.Expect(v.Tables).To(Equal(int32(len(want))))
	g.Expect(v.Mismatched).To(Equal(int32(1)))
	var bad []migrationv1.TableVerification
	for _, it := range v.Items {
		if !it.Match {
			bad = append(bad, it)
		}
	}
	g.Expect(bad).To(HaveLen(1))
	g.Expect(bad[0].Table).To(Equal("public.orders"))
	g.Expect(bad[0].SourceRows).To(Equal(bad[0].TargetRows), "same row count, different content")
	g.Expect(bad[0].Reason).To(ContainSubstring("content"))
	// No cutover.
	g.Expect(cur.Status.Cutover).To(BeNil())
	sec := &corev1.Secret{}
	g.Expect(env.Client.Get(ctx, client.ObjectKey{Namespace: mj.Namespace, Name: "app-db"}, sec)).To(Succeed())
	g.Expect(string(sec.Data["database"])).To(Equal(mj.Spec.Source.Database))
	t.Logf("caught: %s; %s", v.Summary, cond.Message)
	cleanup(g, mj)
}

// A store artifact corrupted between export and import is caught before the
// target is touched: the import step's pods are held until the export has
// succeeded and the import Job exists; the test overwrites the exported
// object in the S3 bucket with the same number of bytes, one of them changed,
// and lets the import run. The import fails at once (the agent's exit code
// 3, no retry), the migration ends Failed naming the import step and the
// checksum, and the target database was never created.
func TestCorruptedArtifactFailsImport(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	d := engine(cairnv1.PostgresEngine)
	mj, _, dst := setup(t, g, d, 1000, storeTransfer(), migrationv1.CutoverSpec{Mode: migrationv1.CutoverAuto})
	release := holdPods(t, g, env.Client, mj.Namespace, contract.StepImport)
	g.Expect(env.Client.Create(ctx, mj)).To(Succeed())
	waitJob(g, env.Client, mj, mj.Namespace, contract.StepImport)

	cur := get(g, mj)
	g.Expect(cur.Status.Step(contract.StepExport)).NotTo(BeNil())
	g.Expect(cur.Status.Step(contract.StepExport).Phase).To(Equal(migrationv1.StepSucceeded))
	art := cur.Status.Artifact
	g.Expect(art).NotTo(BeNil())
	key := corrupt(g, art.Path, mj.Namespace)
	t.Logf("corrupted s3://%s/%s (artifact %s, %d bytes)", install.Bucket, key, art.Path, art.Size)
	release()

	cur = waitDone(g, mj)
	g.Expect(cur.Status.Phase).To(Equal(migrationv1.PhaseFailed), "conditions: %+v", cur.Status.Conditions)
	imp := cur.Status.Step(contract.StepImport)
	g.Expect(imp).NotTo(BeNil())
	g.Expect(imp.Phase).To(Equal(migrationv1.StepFailed))
	g.Expect(imp.Message).To(ContainSubstring("corrupted"))
	g.Expect(imp.Message).To(ContainSubstring("not touched"))
	stalled := apimeta.FindStatusCondition(cur.Status.Conditions, cairnv1.StalledCondition)
	g.Expect(stalled).NotTo(BeNil())
	g.Expect(stalled.Reason).To(Equal(migrationv1.StepFailedReason))
	g.Expect(stalled.Message).To(ContainSubstring("step import"))
	g.Expect(stalled.Message).To(ContainSubstring("corrupted"))
	g.Expect(cur.Status.Step(contract.StepVerify)).To(BeNil(), "nothing verified after a failed import")
	// One pod: exit code 3 fails the Job without retries.
	job := &batchv1.Job{}
	g.Expect(env.Client.Get(ctx, client.ObjectKey{Namespace: imp.Namespace, Name: imp.JobName}, job)).To(Succeed())
	g.Expect(job.Status.Failed).To(Equal(int32(1)))
	// The target was not touched: its database does not exist.
	n, err := d.server.SQL("postgres", "SELECT count(*) FROM pg_database WHERE datname = '"+dst+"'")
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(strings.TrimSpace(n)).To(Equal("0"))
	t.Logf("caught: %s", stalled.Message)
	cleanup(g, mj)
}

func storeTransfer() migrationv1.TransferSpec {
	return migrationv1.TransferSpec{Method: migrationv1.TransferStore, Storage: &cairnv1.StorageSpec{S3: &cairnv1.S3Storage{
		Endpoint: env.Servers.S3.Endpoint(), Bucket: install.Bucket, Prefix: "migrations", Region: "us-east-1", Insecure: true,
		CredentialsSecretRef: cairnv1.LocalObjectReference{Name: "s3"}}}}
}

// corrupt finds the object of artifact (a migration of namespace ns) in the
// bucket and writes it back with the same size and one byte in the middle
// changed; it returns the object's key.
func corrupt(g Gomega, artifact, ns string) string {
	ctx := context.Background()
	s3 := env.Servers.S3.Client()
	var key string
	for o := range s3.ListObjects(ctx, install.Bucket, minio.ListObjectsOptions{Prefix: "migrations/", Recursive: true}) {
		g.Expect(o.Err).NotTo(HaveOccurred())
		if strings.Contains(o.Key, ns) && (o.Key == artifact || path.Base(o.Key) == path.Base(artifact)) {
			g.Expect(key).To(BeEmpty(), "two objects for artifact %s", artifact)
			key = o.Key
		}
	}
	g.Expect(key).NotTo(BeEmpty(), "no object for artifact %s in bucket %s", artifact, install.Bucket)
	obj, err := s3.GetObject(ctx, install.Bucket, key, minio.GetObjectOptions{})
	g.Expect(err).NotTo(HaveOccurred())
	data, err := io.ReadAll(obj)
	obj.Close()
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(len(data)).To(BeNumerically(">", 64))
	data[len(data)/2] ^= 0xff
	_, err = s3.PutObject(ctx, install.Bucket, key, bytes.NewReader(data), int64(len(data)), minio.PutObjectOptions{})
	g.Expect(err).NotTo(HaveOccurred())
	return key
}
