package controller_test

import (
	"context"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"cairn.dev/agent/contract"
	cairnv1 "cairn.dev/apis/meta/v1"
	migrationv1 "cairn.dev/apis/migration/v1"
	"cairn.dev/libs/testing/testenv"
)

// A Store transfer to a target in another cluster (a second API server,
// reached through the kubeconfig Secret): precheck-target, import and
// verify run there, labelled (no owner reference can cross clusters); the
// rest here. Deleting the MigrationJob deletes the remote Jobs too.
func TestStoreTransferToRemoteCluster(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	other, err := testenv.Start(testenv.Options{Scheme: scheme()})
	g.Expect(err).NotTo(HaveOccurred())
	t.Cleanup(func() {
		if err := other.Stop(); err != nil {
			t.Errorf("stopping the second API server: %v", err)
		}
	})
	startOperator(t)
	ns := namespace(t)
	kc, err := other.Kubeconfig(nil)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(env.Client.Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "dr-cluster"},
		Data: map[string][]byte{"config": kc}})).To(Succeed())
	remoteNS := "orders-dr"
	g.Expect(other.Client.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: remoteNS}})).To(Succeed())

	mj := migrationJob(ns, "cross")
	mj.Spec.Target.KubeconfigSecretRef = &migrationv1.KubeconfigSecretRef{Name: "dr-cluster", Key: "config"}
	mj.Spec.Target.Namespace = remoteNS
	mj.Spec.Transfer = migrationv1.TransferSpec{Method: migrationv1.TransferStore, Storage: &cairnv1.StorageSpec{S3: &cairnv1.S3Storage{
		Endpoint: "s3.eu-central-1.amazonaws.com", Bucket: "cairn-migrations", Prefix: "orders",
		CredentialsSecretRef: cairnv1.LocalObjectReference{Name: "s3-credentials"}}}}
	g.Expect(env.Client.Create(ctx, mj)).To(Succeed())

	// The Secrets the remote Jobs need are missing there: nothing runs, the
	// condition says what is missing where.
	g.Eventually(message(mj, cairnv1.ReadyCondition)).WithTimeout(timeout).
		Should(And(ContainSubstring("in the target cluster"), ContainSubstring("target-credentials")))
	g.Expect(current(g, mj).Status.Phase).To(Equal(migrationv1.PhasePending))
	g.Expect(jobNames(env.Client, ns)(g)).To(BeEmpty())
	for _, s := range []struct{ name, k1, k2 string }{{"target-credentials", "username", "password"}, {"s3-credentials", "accessKeyID", "secretAccessKey"}} {
		g.Expect(other.Secret(ctx, remoteNS, s.name, s.k1, s.k2)).To(Succeed())
	}

	// Precheck: one Job per side, each in its cluster.
	src := testenv.WaitForJob(t, env.Client, ns, "cross-precheck-src")
	tgt := testenv.WaitForJob(t, other.Client, remoteNS, "cross-precheck-tgt")
	g.Expect(tgt.OwnerReferences).To(BeEmpty())
	uid := string(current(g, mj).UID)
	g.Expect(tgt.Labels).To(HaveKeyWithValue(migrationv1.MigrationJobUIDLabel, uid))
	g.Expect(tgt.Labels).To(HaveKeyWithValue(migrationv1.MigrationJobNamespaceLabel, ns))
	_, hasSource := envOf(tgt, "CAIRN_DB_HOST")
	g.Expect(hasSource).To(BeFalse(), "the target cluster's Jobs get no source credentials")
	engine, _ := envOf(tgt, "CAIRN_ENGINE")
	g.Expect(engine).To(Equal("postgres"))
	_, hasTarget := envOf(src, contract.EnvTargetHost)
	g.Expect(hasTarget).To(BeFalse())
	store, _ := envOf(src, "CAIRN_STORE")
	g.Expect(store).To(Equal("s3"))
	completeStep(t, env.Client, src, contract.MigrationResult{SourceVersion: "15.4", Tables: 2, EstimatedBytes: 100})
	g.Consistently(phaseOf(mj)).WithTimeout(time.Second).Should(Equal(migrationv1.PhasePrechecking), "waits for the other side")
	completeStep(t, other.Client, tgt, contract.MigrationResult{TargetVersion: "16.2"})

	// Export here, import there with the artifact export reported.
	export := testenv.WaitForJob(t, env.Client, ns, "cross-export")
	g.Eventually(phaseOf(mj)).WithTimeout(timeout).Should(Equal(migrationv1.PhaseCopying))
	g.Expect(current(g, mj).Status.Precheck).To(Equal(&migrationv1.PrecheckResult{Passed: true, SourceVersion: "15.4", TargetVersion: "16.2", Tables: 2, EstimatedBytes: 100}))
	artifact := "orders/migrations/" + ns + "/cross/orders.pgdump.zst"
	completeStep(t, env.Client, export, contract.MigrationResult{Artifact: artifact, Size: 4096, Checksum: "sha256:abc", Bytes: 8192, TablesDone: 2})
	imp := testenv.WaitForJob(t, other.Client, remoteNS, "cross-import")
	got, _ := envOf(imp, contract.EnvArtifact)
	g.Expect(got).To(Equal(artifact))
	got, _ = envOf(imp, contract.EnvTargetPassword)
	g.Expect(got).To(Equal("secret:target-credentials/password"))
	g.Expect(current(g, mj).Status.Artifact).To(Equal(&cairnv1.Artifact{Path: artifact, Size: 4096, Checksum: "sha256:abc"}))
	completeStep(t, other.Client, imp, contract.MigrationResult{TablesDone: 2, Bytes: 8192})

	// Verify there, against the inventory export recorded.
	ver := testenv.WaitForJob(t, other.Client, remoteNS, "cross-verify")
	got, _ = envOf(ver, contract.EnvArtifact)
	g.Expect(got).To(Equal(artifact))
	completeStep(t, other.Client, ver, contract.MigrationResult{Verification: verification("Checksum", []string{"public.a", "public.b"}, nil)})
	g.Eventually(phaseOf(mj)).WithTimeout(timeout).Should(Equal(migrationv1.PhaseReadyForCutover))
	cur := current(g, mj)
	g.Expect(cur.Status.Progress).To(Equal(migrationv1.Progress{TablesDone: 2, TablesTotal: 2, Bytes: 8192}))
	for _, st := range cur.Status.Steps {
		want := migrationv1.ClusterLocal
		if st.Step == contract.StepPrecheckTarget || st.Step == contract.StepImport || st.Step == contract.StepVerify {
			want = migrationv1.ClusterTarget
		}
		g.Expect(st.Cluster).To(Equal(want), st.Step)
	}
	g.Expect(jobNames(other.Client, remoteNS)(g)).To(ConsistOf("cross-precheck-tgt", "cross-import", "cross-verify"))

	// Deleted while waiting for approval: the Jobs in both clusters go.
	g.Expect(env.Client.Delete(ctx, mj)).To(Succeed())
	g.Eventually(testenv.Gone(env.Client, mj)).WithTimeout(timeout).Should(BeTrue())
	g.Expect(jobNames(other.Client, remoteNS)(g)).To(BeEmpty())
	g.Eventually(jobNames(env.Client, ns)).WithTimeout(timeout).Should(BeEmpty())
}

// A target cluster that cannot be reached (no kubeconfig Secret) keeps the
// MigrationJob Pending with a condition that says so; nothing runs.
func TestRemoteClusterUnavailable(t *testing.T) {
	g := NewWithT(t)
	startOperator(t)
	ns := namespace(t)
	mj := migrationJob(ns, "nowhere")
	mj.Spec.Target.KubeconfigSecretRef = &migrationv1.KubeconfigSecretRef{Name: "missing-cluster"}
	mj.Spec.Transfer = migrationv1.TransferSpec{Method: migrationv1.TransferStore, Storage: &cairnv1.StorageSpec{S3: &cairnv1.S3Storage{
		Endpoint: "s3.example.com", Bucket: "b-b", CredentialsSecretRef: cairnv1.LocalObjectReference{Name: "s3-credentials"}}}}
	g.Expect(env.Client.Create(context.Background(), mj)).To(Succeed())
	g.Eventually(message(mj, cairnv1.ReadyCondition)).WithTimeout(timeout).Should(ContainSubstring("missing-cluster"))
	g.Expect(current(g, mj).Status.Phase).To(Equal(migrationv1.PhasePending))
	g.Consistently(jobNames(env.Client, ns)).WithTimeout(time.Second).Should(BeEmpty())
	// Deletion does not hang on the unreachable cluster: no remote Job was made.
	g.Expect(env.Client.Delete(context.Background(), mj)).To(Succeed())
	g.Eventually(testenv.Gone(env.Client, mj)).WithTimeout(timeout).Should(BeTrue())
}
