package manager_test

import (
	"context"
	"flag"
	"sync/atomic"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	"sigs.k8s.io/controller-runtime/pkg/manager"

	"cairn.dev/libs/internal/testtype"
	cairnmgr "cairn.dev/libs/manager"
	"cairn.dev/libs/testing/testenv"
)

var env *testenv.Env

func TestMain(m *testing.M) {
	testenv.Main(m, testenv.Options{Scheme: testtype.Scheme(), CRDDirectoryPaths: []string{testtype.CRDDir()}}, &env)
}

func TestFlags(t *testing.T) {
	o := cairnmgr.New("backup")
	if o.LeaderElectionID != "backup.operators.cairn.dev" || !o.LeaderElection {
		t.Fatalf("defaults: %+v", o)
	}
	fs := flag.NewFlagSet("x", flag.ContinueOnError)
	o.BindFlags(fs)
	err := fs.Parse([]string{"--max-concurrent-reconciles=9", "--rate-limiter-base-delay=1s", "--rate-limiter-max-delay=2m",
		"--leader-elect=false", "--zap-log-level=debug", "--webhook-port=9999", "--metrics-bind-address=0", "--watch-namespaces=a, b",
		"--kube-api-qps=7.5", "--kube-api-burst=11"})
	if err != nil {
		t.Fatal(err)
	}
	if o.MaxConcurrentReconciles != 9 || o.RateLimiterBaseDelay != time.Second || o.RateLimiterMaxDelay != 2*time.Minute ||
		o.LeaderElection || o.WebhookPort != 9999 || o.MetricsAddr != "0" || len(o.WatchNamespaces) != 2 || o.WatchNamespaces[1] != "b" {
		t.Fatalf("flags not applied: %+v", o)
	}
	if o.KubeAPIQPS != 7.5 || o.KubeAPIBurst != 11 {
		t.Fatalf("client rate flags not applied: %+v", o)
	}
	co := o.ControllerOptions()
	if co.MaxConcurrentReconciles != 9 || co.RateLimiter == nil {
		t.Fatalf("controller options: %+v", co)
	}
}

// The client rate flags reach the manager's rest.Config, and the caller's
// config is left as it was.
func TestKubeAPIRate(t *testing.T) {
	o := cairnmgr.New("ratetest")
	o.LeaderElection, o.MetricsAddr, o.ProbeAddr, o.EnableWebhooks = false, "0", "0", false
	o.KubeAPIQPS, o.KubeAPIBurst = 3, 4
	before := env.Config.QPS
	m, err := o.NewManager(env.Config, env.Scheme, nil)
	if err != nil {
		t.Fatal(err)
	}
	if got := m.GetConfig(); got.QPS != 3 || got.Burst != 4 {
		t.Fatalf("manager config QPS/Burst = %v/%v, want 3/4", got.QPS, got.Burst)
	}
	if env.Config.QPS != before {
		t.Fatalf("NewManager changed the caller's config: QPS %v, was %v", env.Config.QPS, before)
	}
}

// leaderRunnable counts how often it was started as leader.
type leaderRunnable struct{ started *atomic.Int32 }

func (l leaderRunnable) Start(ctx context.Context) error {
	l.started.Add(1)
	<-ctx.Done()
	return nil
}
func (leaderRunnable) NeedLeaderElection() bool { return true }

func TestLeaderElectionOneLeaderThenTakeover(t *testing.T) {
	g := NewWithT(t)
	newMgr := func(counter *atomic.Int32) manager.Manager {
		o := cairnmgr.New("letest")
		o.LeaderElectionNamespace = "default"
		o.LeaseDuration, o.RenewDeadline, o.RetryPeriod = 4*time.Second, 3*time.Second, 500*time.Millisecond
		o.MetricsAddr, o.ProbeAddr, o.EnableWebhooks = "0", "0", false
		m, err := o.NewManager(env.Config, env.Scheme, nil)
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(m.Add(leaderRunnable{counter})).To(Succeed())
		return m
	}
	var a, b atomic.Int32
	ctxA, cancelA := context.WithCancel(context.Background())
	ctxB, cancelB := context.WithCancel(context.Background())
	defer cancelB()
	doneA := make(chan struct{})
	go func() { _ = newMgr(&a).Start(ctxA); close(doneA) }()
	g.Eventually(a.Load).WithTimeout(30 * time.Second).Should(Equal(int32(1)))
	go func() { _ = newMgr(&b).Start(ctxB) }()
	// While A leads, B never runs its leader-only work.
	g.Consistently(b.Load).WithTimeout(3 * time.Second).Should(BeZero())

	start := time.Now()
	cancelA() // the leader stops; it releases the lease on the way out
	<-doneA
	g.Eventually(b.Load).WithTimeout(30 * time.Second).Should(Equal(int32(1)))
	t.Logf("takeover after the leader stopped: %s", time.Since(start))
	g.Expect(a.Load()).To(Equal(int32(1)))
}
