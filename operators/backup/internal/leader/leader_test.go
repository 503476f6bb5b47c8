package leader

import (
	"context"
	"fmt"
	"net/http"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	backupv1 "cairn.dev/apis/backup/v1"
	cairnv1 "cairn.dev/apis/meta/v1"
	"cairn.dev/libs/access"
	"cairn.dev/libs/agentjob"
	"cairn.dev/libs/manager"
	"cairn.dev/libs/reconcile"
	"cairn.dev/libs/testing/testenv"
	"cairn.dev/operators/backup/internal/controller"
)

var env *testenv.Env

func scheme() *runtime.Scheme {
	s := runtime.NewScheme()
	utilruntime.Must(clientgoscheme.AddToScheme(s))
	utilruntime.Must(backupv1.AddToScheme(s))
	return s
}

func TestMain(m *testing.M) {
	root, err := testenv.RepoRoot()
	if err != nil {
		panic(err)
	}
	testenv.Main(m, testenv.Options{CRDDirectoryPaths: []string{filepath.Join(root, "deploy/backup/crd/bases")}, Scheme: scheme()}, &env)
}

type counting struct {
	next   http.RoundTripper
	writes *atomic.Int64
}

func (c counting) RoundTrip(r *http.Request) (*http.Response, error) {
	// Lease traffic is leader election itself, not reconciling.
	if r.Method != http.MethodGet && !containsLease(r.URL.Path) {
		c.writes.Add(1)
	}
	return c.next.RoundTrip(r)
}

func containsLease(p string) bool {
	return len(p) > 0 && (filepath.Base(filepath.Dir(p)) == "leases" || filepath.Base(p) == "leases")
}

// replica starts one operator replica with leader election; writes counts its
// API writes outside leader election.
func replica(t *testing.T, ctx context.Context, writes *atomic.Int64) {
	t.Helper()
	cfg := rest.CopyConfig(env.Config)
	cfg.WrapTransport = func(rt http.RoundTripper) http.RoundTripper { return counting{rt, writes} }
	o := manager.New("backup")
	o.LeaderElectionNamespace = "default"
	o.LeaseDuration, o.RenewDeadline, o.RetryPeriod = 4*time.Second, 3*time.Second, 500*time.Millisecond
	o.MetricsAddr, o.ProbeAddr, o.EnableWebhooks = "0", "0", false
	sel := labels.SelectorFromSet(labels.Set{controller.ManagedByLabel: controller.ManagedByValue})
	mgr, err := o.NewManager(cfg, scheme(), map[client.Object]cache.ByObject{
		&batchv1.CronJob{}: {Label: sel}, &batchv1.Job{}: {Label: sel}, &corev1.Pod{}: {Label: sel},
	})
	if err != nil {
		t.Fatal(err)
	}
	r := &controller.BackupJobReconciler{Base: reconcile.NewBase(mgr, "backup-operator", 0), Agent: agentjob.Agent{AgentImage: "agent:test"}}
	r.Guard = &access.Guard{Approver: approver(t), Reviewer: &access.Reviewer{Client: env.Client}}
	signer = r.Guard.Approver
	opts := o.ControllerOptions()
	opts.SkipNameValidation = ptr.To(true) // two replicas in one test process
	if err := r.SetupWithManager(ctx, mgr, opts); err != nil {
		t.Fatal(err)
	}
	go func() { _ = mgr.Start(ctx) }()
}

// signer signs the test's BackupJobs as the webhook would (set by replica).
var signer *access.Approver

// approver is the replicas' shared approval key (libs/access), read with
// the test's uncounted client: the BackupJobs are created without the
// webhook, so backupJob signs them as it would.
func approver(t *testing.T) *access.Approver {
	t.Helper()
	key, err := access.LoadKey(context.Background(), env.Client, env.Client, "default", "cairn-backup-approval-key")
	if err != nil {
		t.Fatal(err)
	}
	a, err := access.NewApprover(key)
	if err != nil {
		t.Fatal(err)
	}
	return a
}

func backupJob(name string) *backupv1.BackupJob {
	bj := &backupv1.BackupJob{
		ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: name},
		Spec: backupv1.BackupJobSpec{
			Database: cairnv1.DatabaseRef{Engine: cairnv1.PostgresEngine, Host: "db", Database: "app",
				CredentialsSecretRef: cairnv1.LocalObjectReference{Name: "db"}},
			Schedule: "0 2 * * *", TimeZone: "UTC", RetentionDays: 7,
			Storage: cairnv1.StorageSpec{PVC: &cairnv1.PVCStorage{ClaimName: "backups"}},
		},
	}
	signer.Approve(bj, access.BackupJobKind, access.BackupJobChecks(bj))
	return bj
}

func cronJobs(g Gomega) int {
	list := &batchv1.CronJobList{}
	g.Expect(env.Client.List(context.Background(), list, client.InNamespace("default"))).To(Succeed())
	return len(list.Items)
}

func TestExactlyOneReplicaReconcilesAndTheOtherTakesOver(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	var writesA, writesB atomic.Int64
	ctxA, stopA := context.WithCancel(ctx)
	defer stopA()
	replica(t, ctxA, &writesA)
	// The objects the BackupJobs refer to exist (else nothing is scheduled).
	g.Expect(env.Secret(ctx, "default", "db", "username", "password")).To(Succeed())
	g.Expect(env.PVC(ctx, "default", "backups")).To(Succeed())
	// A is leader before B starts.
	g.Eventually(func(g Gomega) {
		g.Expect(env.Client.Create(ctx, backupJob("first"))).To(Succeed())
	}).WithTimeout(10 * time.Second).Should(Succeed())
	g.Eventually(cronJobs).WithTimeout(30 * time.Second).Should(Equal(1))
	ctxB, stopB := context.WithCancel(ctx)
	defer stopB()
	replica(t, ctxB, &writesB)

	for i := 0; i < 5; i++ {
		g.Expect(env.Client.Create(ctx, backupJob(fmt.Sprintf("second-%d", i)))).To(Succeed())
	}
	g.Eventually(cronJobs).WithTimeout(30 * time.Second).Should(Equal(6))
	g.Consistently(writesB.Load).WithTimeout(3*time.Second).Should(BeZero(), "the follower wrote while the leader led")
	g.Expect(writesA.Load()).To(BeNumerically(">", 0))

	// The leader stops (it releases its lease); the follower takes over.
	start := time.Now()
	stopA()
	g.Expect(env.Client.Create(ctx, backupJob("third"))).To(Succeed())
	g.Eventually(cronJobs).WithTimeout(60 * time.Second).Should(Equal(7))
	t.Logf("follower reconciled a new BackupJob %s after the leader stopped", time.Since(start))
	g.Expect(writesB.Load()).To(BeNumerically(">", 0))
	// Never a second CronJob for any BackupJob.
	g.Consistently(cronJobs).WithTimeout(2 * time.Second).Should(Equal(7))
}
