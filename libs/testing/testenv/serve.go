package testenv

import (
	"context"
	"sync"
	"testing"
	"time"

	"k8s.io/client-go/rest"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"
	crwebhook "sigs.k8s.io/controller-runtime/pkg/webhook"

	"cairn.dev/libs/access"
)

// What the webhook packages' integration tests share: their own control
// plane, a manager serving nothing but the package's webhooks, a client
// that records the API server's warnings, and polling with a deadline.

// StartForTest is Start, stopped when the test ends.
func StartForTest(t testing.TB, opts Options) *Env {
	t.Helper()
	env, err := Start(opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := env.Stop(); err != nil {
			t.Errorf("stopping the test API server: %v", err)
		}
	})
	return env
}

// ServeWebhooks runs a manager that serves the webhooks setup registers
// (a webhook package's Setup) where the installed webhook configurations
// point, with the approval key in Secret keySecret of namespace "default"
// (access.Options.Prepare), until the test ends; it returns once the
// webhook server listens.
func (e *Env) ServeWebhooks(t testing.TB, keySecret string, setup func(ctrl.Manager) error) ctrl.Manager {
	t.Helper()
	mgr, err := ctrl.NewManager(e.Config, ctrl.Options{
		Scheme:                 e.Scheme,
		Metrics:                metricsserver.Options{BindAddress: "0"},
		HealthProbeBindAddress: "0",
		WebhookServer: crwebhook.NewServer(crwebhook.Options{
			Host: e.Webhook.LocalServingHost, Port: e.Webhook.LocalServingPort, CertDir: e.Webhook.LocalServingCertDir,
		}),
	})
	if err != nil {
		t.Fatal(err)
	}
	keys := access.Options{KeySecret: keySecret}
	if err := keys.Prepare(context.Background(), mgr, "default"); err != nil {
		t.Fatal(err)
	}
	if err := setup(mgr); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- mgr.Start(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("manager: %v", err)
		}
	})
	started := mgr.GetWebhookServer().StartedChecker()
	Poll(t, 30*time.Second, "the webhook server to listen", func() error { return started(nil) })
	return mgr
}

// Warnings collects the API server's warning headers a client received.
type Warnings struct {
	mu   sync.Mutex
	msgs []string
}

// HandleWarningHeaderWithContext implements rest.WarningHandlerWithContext.
func (w *Warnings) HandleWarningHeaderWithContext(_ context.Context, _ int, _ string, text string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.msgs = append(w.msgs, text)
}

// Take returns the warnings since the last call.
func (w *Warnings) Take() []string {
	w.mu.Lock()
	defer w.mu.Unlock()
	m := w.msgs
	w.msgs = nil
	return m
}

// WarningClient is a client of the environment (as cfg, the admin's when
// nil) whose warnings are recorded.
func (e *Env) WarningClient(t testing.TB, cfg *rest.Config) (client.Client, *Warnings) {
	t.Helper()
	if cfg == nil {
		cfg = e.Config
	}
	w := &Warnings{}
	cfg = rest.CopyConfig(cfg)
	cfg.WarningHandlerWithContext = w
	c, err := client.New(cfg, client.Options{Scheme: e.Scheme})
	if err != nil {
		t.Fatal(err)
	}
	return c, w
}

// Poll calls f until it returns nil, every 100 ms; the test fails when
// timeout passed first (what says what it waited for) or the test's
// context ended.
func Poll(t testing.TB, timeout time.Duration, what string, f func() error) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		err := f()
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("waiting %s for %s: %v", timeout, what, err)
		}
		select {
		case <-time.After(100 * time.Millisecond):
		case <-t.Context().Done():
			t.Fatal(t.Context().Err())
		}
	}
}
