package manager_test

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"cairn.dev/libs/internal/testtype"
	cairnmgr "cairn.dev/libs/manager"
)

// noter is a Widget controller: it writes the operator's --note flag into
// each Widget's status.
type noter struct {
	client.Client
	note string
}

func (n *noter) Reconcile(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
	w := &testtype.Widget{}
	if err := n.Get(ctx, req.NamespacedName, w); err != nil {
		return reconcile.Result{}, client.IgnoreNotFound(err)
	}
	if w.Status.Note == n.note {
		return reconcile.Result{}, nil
	}
	w.Status.Note = n.note
	return reconcile.Result{}, n.Status().Update(ctx, w)
}

// widgetOperator is a whole operator as a main.go would declare it.
func widgetOperator(setups *atomic.Int32) cairnmgr.Operator {
	var note string
	return cairnmgr.Operator{
		Name:        "widget",
		Version:     "v1.2.3",
		AddToScheme: []func(*runtime.Scheme) error{testtype.AddToScheme},
		Flags:       func(fs *flag.FlagSet) { fs.StringVar(&note, "note", "default note", "What to write.") },
		Setup: func(_ context.Context, mgr ctrl.Manager, o *cairnmgr.Options) error {
			setups.Add(1)
			return ctrl.NewControllerManagedBy(mgr).For(&testtype.Widget{}).WithOptions(o.ControllerOptions()).
				Complete(&noter{Client: mgr.GetClient(), note: note})
		},
	}
}

func TestRunVersionAndUsage(t *testing.T) {
	var setups atomic.Int32
	op := widgetOperator(&setups)
	var out bytes.Buffer
	if err := op.Run(context.Background(), []string{"--version"}, &out); err != nil || out.String() != "v1.2.3\n" {
		t.Fatalf("--version: %q %v", out.String(), err)
	}
	for _, args := range [][]string{{"--no-such-flag"}, {"stray-argument"}, {"--max-concurrent-reconciles=many"}} {
		err := op.Run(context.Background(), args, &out)
		var usage *cairnmgr.UsageError
		if !errors.As(err, &usage) || cairnmgr.ExitCode(err) != 2 {
			t.Fatalf("%v: %v (exit %d), want a usage error, exit 2", args, err, cairnmgr.ExitCode(err))
		}
	}
	if err := op.Run(context.Background(), []string{"--help"}, &out); err != nil || cairnmgr.ExitCode(err) != 0 {
		t.Fatalf("--help: %v", err)
	}
	if setups.Load() != 0 {
		t.Fatal("Setup ran without a manager to run")
	}
	if cairnmgr.ExitCode(errors.New("boom")) != 1 {
		t.Fatal("a runtime error does not exit 1")
	}
}

func freePort(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().String()
}

// Run, as Main runs it: flags reach the operator's Setup, the controller
// works, the probes answer, and cancelling the context (a signal) stops it
// cleanly: exit 0.
func TestRunServesAndStopsCleanly(t *testing.T) {
	g := NewWithT(t)
	kc, err := env.Kubeconfig(nil)
	g.Expect(err).NotTo(HaveOccurred())
	kubeconfig := filepath.Join(t.TempDir(), "kubeconfig")
	g.Expect(os.WriteFile(kubeconfig, kc, 0o600)).To(Succeed())
	ns, err := env.Namespace(context.Background(), "run")
	g.Expect(err).NotTo(HaveOccurred())
	w := &testtype.Widget{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "w"}}
	g.Expect(env.Client.Create(context.Background(), w)).To(Succeed())

	var setups atomic.Int32
	op := widgetOperator(&setups)
	probe := freePort(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan error, 1)
	go func() {
		done <- op.Run(ctx, []string{"--kubeconfig=" + kubeconfig, "--note=from the flag", "--leader-elect=false",
			"--metrics-bind-address=0", "--health-probe-bind-address=" + probe, "--watch-namespaces=" + ns}, &bytes.Buffer{})
	}()
	g.Eventually(func(g Gomega) string {
		got := &testtype.Widget{}
		g.Expect(env.Client.Get(context.Background(), client.ObjectKeyFromObject(w), got)).To(Succeed())
		return got.Status.Note
	}).WithTimeout(30 * time.Second).Should(Equal("from the flag"))
	for _, path := range []string{"/healthz", "/readyz"} {
		g.Eventually(func() (int, error) {
			resp, err := http.Get(fmt.Sprintf("http://%s%s", probe, path))
			if err != nil {
				return 0, err
			}
			resp.Body.Close()
			return resp.StatusCode, nil
		}).WithTimeout(30*time.Second).Should(Equal(http.StatusOK), path)
	}
	g.Expect(setups.Load()).To(Equal(int32(1)))

	cancel()
	select {
	case err := <-done:
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(cairnmgr.ExitCode(err)).To(BeZero())
	case <-time.After(60 * time.Second):
		t.Fatal("Run did not return after its context ended")
	}
}

func TestRunFailsOnSetupError(t *testing.T) {
	kc, err := env.Kubeconfig(nil)
	if err != nil {
		t.Fatal(err)
	}
	kubeconfig := filepath.Join(t.TempDir(), "kubeconfig")
	if err := os.WriteFile(kubeconfig, kc, 0o600); err != nil {
		t.Fatal(err)
	}
	op := cairnmgr.Operator{Name: "broken", Setup: func(context.Context, ctrl.Manager, *cairnmgr.Options) error {
		return errors.New("no agent image")
	}}
	err = op.Run(context.Background(), []string{"--kubeconfig=" + kubeconfig, "--leader-elect=false", "--metrics-bind-address=0", "--health-probe-bind-address=0"}, &bytes.Buffer{})
	if err == nil || cairnmgr.ExitCode(err) != 1 || !bytes.Contains([]byte(err.Error()), []byte("no agent image")) {
		t.Fatalf("Run with a failing Setup: %v (exit %d), want the error, exit 1", err, cairnmgr.ExitCode(err))
	}
}

// Webhooks are registered when enabled, not when --enable-webhooks=false; an
// operator without webhooks never serves them.
func TestWebhooksOnlyWhenEnabled(t *testing.T) {
	var setups, hooks atomic.Int32
	op := widgetOperator(&setups)
	op.Webhooks = func(ctrl.Manager) error { hooks.Add(1); return nil }
	newOpts := func(enable bool) *cairnmgr.Options {
		o := op.Options()
		o.LeaderElection, o.MetricsAddr, o.ProbeAddr, o.SkipNameValidation = false, "0", "0", true
		o.EnableWebhooks = enable
		return o
	}
	if _, err := op.NewManager(context.Background(), env.Config, newOpts(false)); err != nil {
		t.Fatal(err)
	}
	if hooks.Load() != 0 {
		t.Fatal("webhooks registered with --enable-webhooks=false")
	}
	if _, err := op.NewManager(context.Background(), env.Config, newOpts(true)); err != nil {
		t.Fatal(err)
	}
	if hooks.Load() != 1 || setups.Load() != 2 {
		t.Fatalf("webhooks registered %d times, setups %d; want 1 and 2", hooks.Load(), setups.Load())
	}
	op.Webhooks = nil
	if op.Options().EnableWebhooks {
		t.Fatal("an operator without webhooks defaults to serving them")
	}
	o := newOpts(true)
	if _, err := op.NewManager(context.Background(), env.Config, o); err != nil || o.EnableWebhooks {
		t.Fatalf("an operator without webhooks: EnableWebhooks=%v err=%v", o.EnableWebhooks, err)
	}
}
