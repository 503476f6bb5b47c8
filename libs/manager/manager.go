// Package manager is every Cairn operator's main: an operator declares an
// Operator (name, version, scheme, its own flags, cache restrictions, Setup
// of its controllers, webhooks) and calls Main, which handles flags,
// --version, zap logging, leader election, metrics, health probes,
// webhooks, signals and exit codes. Options are the flags every operator
// shares; Options.NewManager builds a ready ctrl.Manager from them.
package manager

import (
	"flag"
	"fmt"
	"net/http"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/util/workqueue"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	ctrlconfig "sigs.k8s.io/controller-runtime/pkg/config"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/healthz"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"
	"sigs.k8s.io/controller-runtime/pkg/metrics/filters"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	"sigs.k8s.io/controller-runtime/pkg/webhook"
)

// Options configure an operator's manager. Defaults come from New; flags from BindFlags.
type Options struct {
	// Name of the operator, e.g. "backup"; used for the leader-election ID
	// default ("backup.operators.cairn.dev") and the event source.
	Name string
	// Common are the settings the operators share (--agent-image, ...).
	Common

	LeaderElection          bool
	LeaderElectionID        string
	LeaderElectionNamespace string
	LeaseDuration           time.Duration
	RenewDeadline           time.Duration
	RetryPeriod             time.Duration

	// MaxConcurrentReconciles is the number of workers per controller.
	MaxConcurrentReconciles int
	// RateLimiterBaseDelay and RateLimiterMaxDelay bound the work queue's
	// exponential backoff for a failing reconcile (the controller's own
	// retries; distinct from a Job's backoffLimit).
	RateLimiterBaseDelay time.Duration
	RateLimiterMaxDelay  time.Duration

	// MetricsAddr serves /metrics ("0" disables); SecureMetrics serves it over
	// HTTPS behind Kubernetes authentication and authorization.
	MetricsAddr   string
	SecureMetrics bool
	// ProbeAddr serves /healthz and /readyz ("0" disables).
	ProbeAddr string

	EnableWebhooks bool
	WebhookHost    string
	WebhookPort    int
	WebhookCertDir string

	// KubeAPIQPS and KubeAPIBurst bound the client's request rate to the API
	// server; 0 keeps controller-runtime's defaults (20 QPS, burst 30).
	KubeAPIQPS   float64
	KubeAPIBurst int

	// SyncPeriod is how often every cached object is reconciled again.
	SyncPeriod time.Duration
	// WatchNamespaces restricts the operator to these namespaces; empty
	// means every namespace.
	WatchNamespaces []string

	Zap zap.Options

	// SkipNameValidation lets several managers of one operator run in one
	// process (tests): controller names need not be unique. Not a flag.
	SkipNameValidation bool
}

// New returns the defaults for operator name.
func New(name string) *Options {
	return &Options{
		Name:                    name,
		LeaderElection:          true,
		LeaderElectionID:        name + ".operators.cairn.dev",
		LeaseDuration:           15 * time.Second,
		RenewDeadline:           10 * time.Second,
		RetryPeriod:             2 * time.Second,
		MaxConcurrentReconciles: 4,
		RateLimiterBaseDelay:    50 * time.Millisecond,
		RateLimiterMaxDelay:     5 * time.Minute,
		MetricsAddr:             ":8443",
		SecureMetrics:           true,
		ProbeAddr:               ":8081",
		EnableWebhooks:          true,
		WebhookPort:             9443,
		SyncPeriod:              10 * time.Hour,
		Zap:                     zap.Options{Development: false},
	}
}

// BindFlags registers every option on fs.
func (o *Options) BindFlags(fs *flag.FlagSet) {
	fs.BoolVar(&o.LeaderElection, "leader-elect", o.LeaderElection, "Elect a leader so only one replica reconciles.")
	fs.StringVar(&o.LeaderElectionID, "leader-election-id", o.LeaderElectionID, "Name of the Lease used for leader election.")
	fs.StringVar(&o.LeaderElectionNamespace, "leader-election-namespace", o.LeaderElectionNamespace, "Namespace of the Lease (default: the pod's namespace).")
	fs.DurationVar(&o.LeaseDuration, "leader-lease-duration", o.LeaseDuration, "How long a non-leader waits before taking over an unrenewed lease.")
	fs.DurationVar(&o.RenewDeadline, "leader-renew-deadline", o.RenewDeadline, "How long the leader retries renewing before giving up leadership.")
	fs.DurationVar(&o.RetryPeriod, "leader-retry-period", o.RetryPeriod, "How often leader-election clients retry.")
	fs.IntVar(&o.MaxConcurrentReconciles, "max-concurrent-reconciles", o.MaxConcurrentReconciles, "Workers per controller.")
	fs.DurationVar(&o.RateLimiterBaseDelay, "rate-limiter-base-delay", o.RateLimiterBaseDelay, "First retry delay of a failed reconcile (doubles each failure).")
	fs.DurationVar(&o.RateLimiterMaxDelay, "rate-limiter-max-delay", o.RateLimiterMaxDelay, "Longest retry delay of a failed reconcile.")
	fs.StringVar(&o.MetricsAddr, "metrics-bind-address", o.MetricsAddr, "Address of the metrics endpoint; \"0\" disables it.")
	fs.BoolVar(&o.SecureMetrics, "metrics-secure", o.SecureMetrics, "Serve metrics over HTTPS with Kubernetes authn/authz.")
	fs.StringVar(&o.ProbeAddr, "health-probe-bind-address", o.ProbeAddr, "Address of /healthz and /readyz; \"0\" disables them.")
	fs.BoolVar(&o.EnableWebhooks, "enable-webhooks", o.EnableWebhooks, "Serve the admission and conversion webhooks.")
	fs.IntVar(&o.WebhookPort, "webhook-port", o.WebhookPort, "Port of the webhook server.")
	fs.StringVar(&o.WebhookCertDir, "webhook-cert-dir", o.WebhookCertDir, "Folder with tls.crt and tls.key for the webhook server.")
	fs.DurationVar(&o.SyncPeriod, "sync-period", o.SyncPeriod, "How often every object is reconciled again even without events.")
	fs.Float64Var(&o.KubeAPIQPS, "kube-api-qps", o.KubeAPIQPS, "Requests per second to the API server (0: controller-runtime's default, 20).")
	fs.IntVar(&o.KubeAPIBurst, "kube-api-burst", o.KubeAPIBurst, "Burst of requests to the API server (0: controller-runtime's default, 30).")
	fs.Func("watch-namespaces", "Comma-separated namespaces to watch (default: all).", func(v string) error {
		o.WatchNamespaces = nil
		for _, ns := range strings.Split(v, ",") {
			if ns = strings.TrimSpace(ns); ns != "" {
				o.WatchNamespaces = append(o.WatchNamespaces, ns)
			}
		}
		return nil
	})
	o.Zap.BindFlags(fs)
}

// Logger returns the zap logger the options describe; install it with ctrl.SetLogger.
func (o *Options) Logger() {
	ctrl.SetLogger(zap.New(zap.UseFlagOptions(&o.Zap)))
}

// ControllerOptions are the work-queue settings every controller of the operator uses.
func (o *Options) ControllerOptions() controller.Options {
	return controller.Options{
		MaxConcurrentReconciles: o.MaxConcurrentReconciles,
		RateLimiter:             workqueue.NewTypedItemExponentialFailureRateLimiter[reconcile.Request](o.RateLimiterBaseDelay, o.RateLimiterMaxDelay),
	}
}

// NewManager builds a manager for cfg. byObject restricts what the cache holds
// per kind (e.g. only CronJobs with the operator's label); managedFields are
// stripped from every cached object to save memory.
func (o *Options) NewManager(cfg *rest.Config, scheme *runtime.Scheme, byObject map[client.Object]cache.ByObject) (ctrl.Manager, error) {
	cfg = rest.CopyConfig(cfg)
	if o.KubeAPIQPS > 0 {
		cfg.QPS = float32(o.KubeAPIQPS)
	}
	if o.KubeAPIBurst > 0 {
		cfg.Burst = o.KubeAPIBurst
	}
	metricsOpts := metricsserver.Options{BindAddress: o.MetricsAddr, SecureServing: o.SecureMetrics}
	if o.SecureMetrics && o.MetricsAddr != "0" {
		metricsOpts.FilterProvider = filters.WithAuthenticationAndAuthorization
	}
	sync := o.SyncPeriod
	var namespaces map[string]cache.Config
	for _, ns := range o.WatchNamespaces {
		if namespaces == nil {
			namespaces = map[string]cache.Config{}
		}
		namespaces[ns] = cache.Config{}
	}
	mopts := ctrl.Options{
		Scheme:                        scheme,
		Metrics:                       metricsOpts,
		HealthProbeBindAddress:        o.ProbeAddr,
		LeaderElection:                o.LeaderElection,
		LeaderElectionID:              o.LeaderElectionID,
		LeaderElectionNamespace:       o.LeaderElectionNamespace,
		LeaderElectionReleaseOnCancel: true,
		LeaseDuration:                 &o.LeaseDuration,
		RenewDeadline:                 &o.RenewDeadline,
		RetryPeriod:                   &o.RetryPeriod,
		Cache: cache.Options{
			ByObject:          byObject,
			DefaultNamespaces: namespaces,
			DefaultTransform:  cache.TransformStripManagedFields(),
			SyncPeriod:        &sync,
		},
		Controller: ctrlConfig(o),
	}
	if o.EnableWebhooks {
		mopts.WebhookServer = webhook.NewServer(webhook.Options{Host: o.WebhookHost, Port: o.WebhookPort, CertDir: o.WebhookCertDir})
	}
	mgr, err := ctrl.NewManager(cfg, mopts)
	if err != nil {
		return nil, fmt.Errorf("creating the %s manager: %w", o.Name, err)
	}
	if o.ProbeAddr != "0" {
		if err := mgr.AddHealthzCheck("healthz", healthz.Ping); err != nil {
			return nil, err
		}
		ready := healthz.Ping
		if o.EnableWebhooks {
			ready = func(req *http.Request) error { return mgr.GetWebhookServer().StartedChecker()(req) }
		}
		if err := mgr.AddReadyzCheck("readyz", ready); err != nil {
			return nil, err
		}
	}
	return mgr, nil
}

func ctrlConfig(o *Options) ctrlconfig.Controller {
	c := ctrlconfig.Controller{MaxConcurrentReconciles: o.MaxConcurrentReconciles}
	if o.SkipNameValidation {
		c.SkipNameValidation = &o.SkipNameValidation
	}
	return c
}

// EventSource names the operator in the Events it emits and in its logs:
// "<name>-operator".
func (o *Options) EventSource() string { return o.Name + "-operator" }
