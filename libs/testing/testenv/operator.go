package testenv

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"sync"
	"testing"
	"time"

	"k8s.io/client-go/rest"
	ctrl "sigs.k8s.io/controller-runtime"

	"cairn.dev/libs/manager"
)

// LeaderElectionNamespace is where an operator started by StartOperator
// keeps its Lease.
const LeaderElectionNamespace = "default"

// OperatorOptions tune StartOperator.
type OperatorOptions struct {
	// Config to connect with; nil means Env.Config (cluster admin). A config
	// from AsGeneratedRole runs the operator with its generated RBAC only.
	// Wrap its transport to count the operator's requests.
	Config *rest.Config
	// Args are command-line flags, parsed as the operator's binary parses
	// them: the shared ones (e.g. "--max-concurrent-reconciles=2") and the
	// operator's own (e.g. "--agent-image=...").
	Args []string
	// LeaderElection runs leader election (in LeaderElectionNamespace, with
	// short leases); off by default.
	LeaderElection bool
	// Options, when set, adjusts the manager options last.
	Options func(*manager.Options)
	// ReadyTimeout bounds the wait until the operator is serving; 0 means
	// one minute.
	ReadyTimeout time.Duration
}

// Operator is an operator running in-process.
type Operator struct {
	// Manager is the operator's manager.
	Manager ctrl.Manager
	// Options are the options it was built with.
	Options *manager.Options

	cancel context.CancelFunc
	done   chan error
	once   sync.Once
	err    error
}

// StartOperator builds op's manager exactly as manager.Main does (its
// scheme, cache restrictions, Setup and webhooks), against this Env: metrics
// and probes off, webhooks served where the installed webhook
// configurations point, several managers per process allowed. It returns
// once the operator leads (at once without leader election) and its webhook
// server is up — so objects created next pass its webhooks; its controllers
// may still be filling their caches, so poll for their effects. Stop stops
// it.
func (e *Env) StartOperator(ctx context.Context, op manager.Operator, oo OperatorOptions) (*Operator, error) {
	cfg := oo.Config
	if cfg == nil {
		cfg = e.Config
	}
	o := op.Options()
	o.MetricsAddr, o.ProbeAddr = "0", "0"
	o.SkipNameValidation = true
	o.LeaderElection = oo.LeaderElection
	o.LeaderElectionNamespace = LeaderElectionNamespace
	o.LeaseDuration, o.RenewDeadline, o.RetryPeriod = 4*time.Second, 3*time.Second, 500*time.Millisecond
	o.WebhookHost, o.WebhookPort, o.WebhookCertDir = e.Webhook.LocalServingHost, e.Webhook.LocalServingPort, e.Webhook.LocalServingCertDir
	fs := flag.NewFlagSet(op.Name+"-operator", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	op.BindFlags(fs, o)
	if err := fs.Parse(oo.Args); err != nil {
		return nil, fmt.Errorf("testenv: operator flags %v: %w", oo.Args, err)
	}
	if oo.Options != nil {
		oo.Options(o)
	}
	runCtx, cancel := context.WithCancel(ctx)
	mgr, err := op.NewManager(runCtx, cfg, o)
	if err != nil {
		cancel()
		return nil, err
	}
	r := &Operator{Manager: mgr, Options: o, cancel: cancel, done: make(chan error, 1)}
	go func() { r.done <- mgr.Start(runCtx) }()

	timeout := oo.ReadyTimeout
	if timeout <= 0 {
		timeout = time.Minute
	}
	readyCtx, stopWaiting := context.WithTimeout(runCtx, timeout)
	defer stopWaiting()
	ready := make(chan error, 1)
	go func() { ready <- waitServing(readyCtx, mgr, o.EnableWebhooks) }()
	select {
	case err := <-r.done:
		cancel()
		if err == nil {
			err = errors.New("stopped before it was serving")
		}
		return nil, fmt.Errorf("testenv: operator %s: %w", op.Name, err)
	case err := <-ready:
		if err != nil {
			_ = r.Stop()
			return nil, fmt.Errorf("testenv: operator %s not serving within %s (may it take its Lease?): %w", op.Name, timeout, err)
		}
	}
	return r, nil
}

func waitServing(ctx context.Context, mgr ctrl.Manager, webhooks bool) error {
	select {
	case <-mgr.Elected():
	case <-ctx.Done():
		return fmt.Errorf("not elected leader: %w", context.Cause(ctx))
	}
	if !mgr.GetCache().WaitForCacheSync(ctx) {
		return fmt.Errorf("cache not synced: %w", context.Cause(ctx))
	}
	if !webhooks {
		return nil
	}
	started := mgr.GetWebhookServer().StartedChecker()
	for {
		if started(nil) == nil {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("webhook server not started: %w", context.Cause(ctx))
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// StartOperatorForTest is StartOperator for one test: it fails the test when
// the operator does not start, and stops it when the test ends (failing the
// test if the manager ended with an error).
func (e *Env) StartOperatorForTest(t testing.TB, op manager.Operator, oo OperatorOptions) *Operator {
	t.Helper()
	r, err := e.StartOperator(context.Background(), op, oo)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := r.Stop(); err != nil {
			t.Errorf("operator %s: %v", op.Name, err)
		}
	})
	return r
}

// Stop stops the operator and waits until it has (at most a minute); it
// returns the manager's error, if any. Safe to call more than once.
func (r *Operator) Stop() error {
	r.once.Do(func() {
		r.cancel()
		select {
		case r.err = <-r.done:
		case <-time.After(time.Minute):
			r.err = errors.New("the manager did not stop within a minute")
		}
	})
	return r.err
}
