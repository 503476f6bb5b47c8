package migration_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	authenticationv1 "k8s.io/api/authentication/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"cairn.dev/agent/contract"
	cairnv1 "cairn.dev/apis/meta/v1"
	migrationv1 "cairn.dev/apis/migration/v1"
	"cairn.dev/e2e/cluster"
	"cairn.dev/e2e/install"
)

// Names in the second cluster.
const (
	remoteNode      = "cairn-pods-b"
	remoteNamespace = "migration-target"
	remoteSA        = "cairn-migration"
)

// remoteCluster is the second cluster: a control plane of its own with its
// own pod runner node (real pods of the agent image), no Cairn installed —
// the migration operator needs only Jobs, pods and Secrets there.
type remoteCluster struct {
	*cluster.Cluster
	client client.Client
	// kubeconfig for ServiceAccount remoteNamespace/remoteSA, certificate
	// authority and token embedded (libs/remote refuses file paths).
	kubeconfig []byte
}

// startRemote starts the second cluster for t and stops it when t ends,
// passed or failed (also on Ctrl-C). In remoteNamespace it creates the
// target's credentials Secret ("db"), the store's ("s3") and a
// ServiceAccount with exactly the permissions docs/migration.md lists for
// the kubeconfig's identity.
func startRemote(t *testing.T, g Gomega, d db) *remoteCluster {
	ctx := context.Background()
	start := time.Now()
	c := cluster.StartT(t, cluster.Options{Name: fmt.Sprintf("cairn-e2e-b-%d-%d", os.Getpid(), time.Now().UnixNano()%1e6),
		Workdir: filepath.Join(env.Opts.Dir, "kwok-b"), RealPods: true, PodRunnerNode: remoteNode, AgentImage: env.Opts.AgentImage})
	t.Cleanup(c.StopOnSignal(nil))
	t.Logf("second cluster %s up in %s (pod runner node %s)", c.Name, time.Since(start).Round(time.Millisecond), remoteNode)
	cl, err := c.Client(install.Scheme())
	g.Expect(err).NotTo(HaveOccurred())
	r := &remoteCluster{Cluster: c, client: cl}
	for _, o := range []client.Object{
		&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: remoteNamespace}},
		&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: remoteNamespace, Name: "db"},
			StringData: map[string]string{"username": d.user, "password": d.pass}},
		&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: remoteNamespace, Name: "s3"},
			StringData: map[string]string{"accessKeyID": install.S3AccessKey, "secretAccessKey": install.S3SecretKey}},
		&corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: remoteNamespace, Name: remoteSA}},
		&rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Namespace: remoteNamespace, Name: remoteSA}, Rules: []rbacv1.PolicyRule{
			{APIGroups: []string{"batch"}, Resources: []string{"jobs"}, Verbs: []string{"get", "list", "create", "delete"}},
			{APIGroups: []string{""}, Resources: []string{"pods"}, Verbs: []string{"list"}},
			{APIGroups: []string{""}, Resources: []string{"secrets", "persistentvolumeclaims"}, Verbs: []string{"get"}},
		}},
		&rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Namespace: remoteNamespace, Name: remoteSA},
			RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: remoteSA},
			Subjects: []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Namespace: remoteNamespace, Name: remoteSA}}},
	} {
		g.Expect(cl.Create(ctx, o)).To(Succeed())
	}
	tr := &authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: ptr.To(int64(3600))}}
	g.Expect(cl.SubResource("token").Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: remoteNamespace, Name: remoteSA}}, tr)).To(Succeed())
	tls := rest.CopyConfig(c.Config)
	g.Expect(rest.LoadTLSFiles(tls)).To(Succeed())
	kc := clientcmdapi.NewConfig()
	kc.Clusters["b"] = &clientcmdapi.Cluster{Server: c.Config.Host, CertificateAuthorityData: tls.CAData}
	kc.AuthInfos[remoteSA] = &clientcmdapi.AuthInfo{Token: tr.Status.Token}
	kc.Contexts["b"] = &clientcmdapi.Context{Cluster: "b", AuthInfo: remoteSA, Namespace: remoteNamespace}
	kc.CurrentContext = "b"
	r.kubeconfig, err = clientcmd.Write(*kc)
	g.Expect(err).NotTo(HaveOccurred())
	return r
}

// The target is in a second cluster. A MigrationJob in the first cluster
// names it by target.kubeconfigSecretRef (a Secret holding a kubeconfig of a
// ServiceAccount of the second cluster with only the documented
// permissions) and target.namespace, and transfers through the S3 store:
// precheck-source and export run as Jobs in the first cluster,
// precheck-target, import and verify as Jobs in the second (real pods on its
// own pod runner node). The migration succeeds, the target equals the source
// by the test's own check, and deleting the MigrationJob removes its Jobs in
// the second cluster (the finalizer: they carry no owner reference).
//
// Then a Direct transfer to the same target: the Jobs all run in the first
// cluster (a direct copy needs source and target reachable from one Job;
// the kubeconfig is not used) and the second cluster gets none.
func TestTargetInSecondCluster(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	d := engine(cairnv1.PostgresEngine)
	b := startRemote(t, g, d)

	mj, want, dst := setup(t, g, d, 1000, storeTransfer(),
		migrationv1.CutoverSpec{Mode: migrationv1.CutoverAuto, WritersStopped: true, SwitchSecret: &cairnv1.LocalObjectReference{Name: "app-db"}})
	toRemote(g, b, mj)
	g.Expect(env.Client.Create(ctx, mj)).To(Succeed())
	cur := waitDone(g, mj)
	g.Expect(cur.Status.Phase).To(Equal(migrationv1.PhaseSucceeded), "conditions: %+v", cur.Status.Conditions)
	g.Expect(cur.Status.Verification).NotTo(BeNil())
	g.Expect(cur.Status.Verification.Mismatched).To(BeZero())
	g.Expect(cur.Status.Verification.Tables).To(Equal(int32(len(want))))
	got, err := d.tables(d.server, dst)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(got).To(Equal(want))

	// Where each step ran, by status and by the Jobs in each cluster.
	where := map[string]string{}
	for _, s := range cur.Status.Steps {
		g.Expect(s.Phase).To(Equal(migrationv1.StepSucceeded), "step %s", s.Step)
		where[s.Step] = s.Cluster + "/" + s.Namespace
	}
	local, target := migrationv1.ClusterLocal+"/"+mj.Namespace, migrationv1.ClusterTarget+"/"+remoteNamespace
	g.Expect(where).To(Equal(map[string]string{
		contract.StepPrecheckSource: local, contract.StepExport: local,
		contract.StepPrecheckTarget: target, contract.StepImport: target, contract.StepVerify: target,
		// cutover compares the source, writes stopped, with the export's
		// inventory the target was verified against: here, at the source.
		contract.StepCutover: local,
	}))
	g.Expect(jobSteps(g, env.Client, mj)).To(Equal([]string{contract.StepCutover, contract.StepExport, contract.StepPrecheckSource}))
	g.Expect(jobSteps(g, b.client, mj)).To(Equal([]string{contract.StepImport, contract.StepPrecheckTarget, contract.StepVerify}))
	pods := &corev1.PodList{}
	g.Expect(b.client.List(ctx, pods, client.InNamespace(remoteNamespace), client.MatchingLabels{migrationv1.MigrationJobUIDLabel: string(mj.UID)})).To(Succeed())
	g.Expect(pods.Items).NotTo(BeEmpty())
	for _, p := range pods.Items {
		g.Expect(p.Spec.NodeName).To(Equal(remoteNode), "pod %s", p.Name)
		g.Expect(p.Status.Phase).To(Equal(corev1.PodSucceeded), "pod %s", p.Name)
	}
	t.Logf("store migration to the second cluster: %s in %s; steps %v", cur.Status.Verification.Summary,
		cur.Status.CompletionTime.Sub(cur.Status.StartTime.Time), where)

	// Deleting it removes its Jobs (and so their pods) in both clusters.
	cleanup(g, mj)
	g.Eventually(func() []string { return jobSteps(g, b.client, mj) }).WithTimeout(time.Minute).Should(BeEmpty())
	g.Eventually(func(g Gomega) []corev1.Pod {
		l := &corev1.PodList{}
		g.Expect(b.client.List(ctx, l, client.InNamespace(remoteNamespace), client.MatchingLabels{migrationv1.MigrationJobUIDLabel: string(mj.UID)})).To(Succeed())
		return l.Items
	}).WithTimeout(2*time.Minute).Should(BeEmpty(), "the deleted Jobs' pods in the second cluster")

	// Direct: everything runs here.
	mj2, want2, dst2 := setup(t, g, d, 200, migrationv1.TransferSpec{}, migrationv1.CutoverSpec{Mode: migrationv1.CutoverAuto})
	toRemote(g, b, mj2)
	g.Expect(env.Client.Create(ctx, mj2)).To(Succeed())
	cur = waitDone(g, mj2)
	g.Expect(cur.Status.Phase).To(Equal(migrationv1.PhaseSucceeded), "conditions: %+v", cur.Status.Conditions)
	got, err = d.tables(d.server, dst2)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(got).To(Equal(want2))
	for _, s := range cur.Status.Steps {
		g.Expect(s.Cluster).To(Equal(migrationv1.ClusterLocal), "step %s", s.Step)
	}
	g.Expect(jobSteps(g, env.Client, mj2)).To(Equal([]string{contract.StepCopy, contract.StepCutover, contract.StepPrecheck, contract.StepVerify}))
	all := &batchv1.JobList{}
	g.Expect(b.client.List(ctx, all)).To(Succeed())
	g.Expect(all.Items).To(BeEmpty(), "no Job in the second cluster")
	cleanup(g, mj2)
}

// toRemote points mj's target at the second cluster: a kubeconfig Secret in
// mj's namespace, target.kubeconfigSecretRef and target.namespace.
func toRemote(g Gomega, b *remoteCluster, mj *migrationv1.MigrationJob) {
	g.Expect(env.Client.Create(context.Background(), &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: mj.Namespace, Name: "cluster-b"},
		Data: map[string][]byte{"kubeconfig": b.kubeconfig}})).To(Succeed())
	mj.Spec.Target.KubeconfigSecretRef = &migrationv1.KubeconfigSecretRef{Name: "cluster-b"}
	mj.Spec.Target.Namespace = remoteNamespace
}

// jobSteps lists the steps of mj's Jobs in c (labelled with its UID), sorted.
func jobSteps(g Gomega, c client.Client, mj *migrationv1.MigrationJob) []string {
	l := &batchv1.JobList{}
	err := c.List(context.Background(), l, client.MatchingLabels{migrationv1.MigrationJobUIDLabel: string(mj.UID)})
	if apierrors.IsNotFound(err) {
		return nil
	}
	g.Expect(err).NotTo(HaveOccurred())
	out := []string{}
	for _, j := range l.Items {
		out = append(out, j.Labels[migrationv1.StepLabel])
	}
	sort.Strings(out)
	return out
}
