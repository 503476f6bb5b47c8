package install

import (
	"context"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/go-logr/logr"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"

	"cairn.dev/e2e/cluster"
)

// RunTests is the body of an e2e package's TestMain: it builds o.Binaries,
// brings the platform up with o (Root and Dir default to the repository and
// a temporary folder; progress lines print as "e2e: …"), sets *env, runs the
// tests, prints the cluster's and every operator process's log tails when a
// test failed, and stops everything — also on Ctrl-C. It returns the exit
// code for os.Exit. Each of ready runs with the Env before the tests do.
func RunTests(m *testing.M, o Options, env **Env, ready ...func(*Env)) int {
	ctrllog.SetLogger(logr.Discard())
	ctx := context.Background()
	fail := func(err error) int { fmt.Fprintln(os.Stderr, "e2e:", err); return 1 }
	var err error
	if o.Root == "" {
		if o.Root, err = cluster.RepoRoot(); err != nil {
			return fail(err)
		}
	}
	if o.Dir == "" {
		if o.Dir, err = os.MkdirTemp("", "cairn-e2e-"); err != nil {
			return fail(err)
		}
		defer os.RemoveAll(o.Dir)
	}
	if o.Logf == nil {
		o.Logf = func(f string, a ...any) { fmt.Printf("e2e: "+f+"\n", a...) }
	}
	start := time.Now()
	e, err := Up(ctx, o)
	if err != nil {
		return fail(err)
	}
	o.Logf("platform up in %s (cluster %s)", time.Since(start).Round(time.Millisecond), e.Cluster.Started.Round(time.Millisecond))
	*env = e
	for _, f := range ready {
		f(e)
	}
	undo := e.Cluster.StopOnSignal(func() {
		for _, op := range e.Processes {
			_ = op.Kill()
		}
	})
	code := m.Run()
	undo()
	if code != 0 {
		e.Cluster.DumpLogs(func(f string, a ...any) { fmt.Printf(f+"\n", a...) })
		for _, op := range e.Processes {
			fmt.Printf("--- %s operator log (last 60 lines)\n%s\n", op.Name, op.Tail(60))
		}
		e.dumpOperatorPods()
	}
	if err := e.Down(); err != nil {
		fmt.Fprintln(os.Stderr, "e2e: stopping:", err)
	}
	return code
}

// dumpOperatorPods prints the end of each operator pod's log (Installed).
func (e *Env) dumpOperatorPods() {
	if !e.Opts.Installed || e.Cluster.Pods == nil {
		return
	}
	pods := &corev1.PodList{}
	if err := e.Client.List(context.Background(), pods, client.InNamespace(Namespace)); err != nil {
		fmt.Printf("--- operator pods: %v\n", err)
		return
	}
	for _, p := range pods.Items {
		lines := strings.Split(strings.TrimRight(e.Cluster.Pods.Logs(p.Namespace, p.Name, "manager"), "\n"), "\n")
		if len(lines) > 40 {
			lines = lines[len(lines)-40:]
		}
		fmt.Printf("--- pod %s (%s) log (last %d lines)\n%s\n", p.Name, p.Status.Phase, len(lines), strings.Join(lines, "\n"))
	}
}
