package manager

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"time"

	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/config"
)

// Operator is what an operator's main.go declares; Main does the rest:
// flags, --version, zap logging, the scheme, leader election, metrics,
// health probes, webhooks, signal handling and exit codes.
//
//	func main() {
//		manager.Main(manager.Operator{
//			Name: "backup", Version: version,
//			AddToScheme: []func(*runtime.Scheme) error{backupv1.AddToScheme, backupv1alpha1.AddToScheme},
//			Flags:       func(fs *flag.FlagSet) { fs.StringVar(&agentImage, "agent-image", ...) },
//			CacheByObject: controller.CacheByObject,
//			Setup: func(ctx context.Context, mgr ctrl.Manager, o *manager.Options) error {
//				return (&controller.BackupJobReconciler{...}).SetupWithManager(ctx, mgr, o.ControllerOptions())
//			},
//			Webhooks: webhook.Setup,
//		})
//	}
type Operator struct {
	// Name of the operator, e.g. "backup": the leader-election ID
	// ("backup.operators.cairn.dev"), the logger and the Event source
	// ("backup-operator").
	Name string
	// Version is printed by --version and logged at start.
	Version string
	// AddToScheme registers the kinds the operator reads or writes beyond
	// client-go's (which are always there).
	AddToScheme []func(*runtime.Scheme) error
	// Flags registers the operator's own flags (e.g. --agent-image); the
	// values are set when Setup runs.
	Flags func(fs *flag.FlagSet)
	// CacheByObject restricts what the cache holds per kind (e.g. only
	// objects with the operator's label, without their spec); nil for none.
	CacheByObject func() map[client.Object]cache.ByObject
	// Prepare, when set, runs before Setup and Webhooks (and is kept when a
	// test replaces Setup): state both need, e.g. the approval key the
	// webhooks sign with and the controllers verify (libs/access).
	Prepare func(ctx context.Context, mgr ctrl.Manager, o *Options) error
	// Setup registers the operator's controllers with mgr. Use
	// o.ControllerOptions() for each controller and o.EventSource() for its
	// Event recorder.
	Setup func(ctx context.Context, mgr ctrl.Manager, o *Options) error
	// Webhooks registers the admission and conversion webhooks; called only
	// with --enable-webhooks (the default). Nil: the operator has none.
	Webhooks func(mgr ctrl.Manager) error

	// AgentImage, when set, is the default of --agent-image (Options.AgentImage).
	AgentImage string
	// CleanupDeadline, when set, is the default of --cleanup-deadline
	// (Options.CleanupDeadline).
	CleanupDeadline time.Duration
	// Access: the operator reviews its requesters and signs what they were
	// approved for (libs/access): its flags are bound (Options.Access) and
	// its Guard is registered for the manager before Prepare. Trusted is
	// the default of --trusted-requesters.
	Access  bool
	Trusted []string
}

// Scheme is client-go's kinds plus op.AddToScheme.
func (op Operator) Scheme() (*runtime.Scheme, error) {
	s := runtime.NewScheme()
	if err := clientgoscheme.AddToScheme(s); err != nil {
		return nil, err
	}
	for _, add := range op.AddToScheme {
		if err := add(s); err != nil {
			return nil, fmt.Errorf("building the %s scheme: %w", op.Name, err)
		}
	}
	return s, nil
}

// Options returns the defaults for op: New(op.Name), without webhooks when
// op has none.
func (op Operator) Options() *Options {
	o := New(op.Name)
	if op.Webhooks == nil {
		o.EnableWebhooks = false
	}
	o.AgentImage, o.CleanupDeadline = op.AgentImage, op.CleanupDeadline
	o.Access.Defaults(op.Name, op.Trusted...)
	return o
}

// NewManager builds op's manager for cfg with o, and registers its
// controllers and (with o.EnableWebhooks) its webhooks — everything Main
// does but start it. Tests use it to run an operator in-process exactly as
// its main wires it (see testenv.StartOperator).
func (op Operator) NewManager(ctx context.Context, cfg *rest.Config, o *Options) (ctrl.Manager, error) {
	if op.Setup == nil {
		return nil, fmt.Errorf("operator %q: no Setup", op.Name)
	}
	s, err := op.Scheme()
	if err != nil {
		return nil, err
	}
	var byObject map[client.Object]cache.ByObject
	if op.CacheByObject != nil {
		byObject = op.CacheByObject()
	}
	if op.Webhooks == nil {
		o.EnableWebhooks = false
	}
	mgr, err := o.NewManager(cfg, s, byObject)
	if err != nil {
		return nil, err
	}
	if op.Access {
		if err := o.Access.Prepare(ctx, mgr, o.LeaderElectionNamespace); err != nil {
			return nil, fmt.Errorf("preparing the %s operator: %w", op.Name, err)
		}
	}
	if op.Prepare != nil {
		if err := op.Prepare(ctx, mgr, o); err != nil {
			return nil, fmt.Errorf("preparing the %s operator: %w", op.Name, err)
		}
	}
	if err := op.Setup(ctx, mgr, o); err != nil {
		return nil, fmt.Errorf("setting up the %s controllers: %w", op.Name, err)
	}
	if o.EnableWebhooks {
		if err := op.Webhooks(mgr); err != nil {
			return nil, fmt.Errorf("setting up the %s webhooks: %w", op.Name, err)
		}
	}
	return mgr, nil
}

// UsageError is a command line that does not parse: exit code 2.
type UsageError struct{ Err error }

func (e *UsageError) Error() string { return e.Err.Error() }
func (e *UsageError) Unwrap() error { return e.Err }

// Run is Main without the process: it parses args (without the program
// name), prints the version to stdout for --version, installs the zap
// logger, connects (--kubeconfig, else in-cluster), builds the manager and
// runs it until ctx ends. A clean stop returns nil.
func (op Operator) Run(ctx context.Context, args []string, stdout io.Writer) error {
	o := op.Options()
	fs := flag.NewFlagSet(op.Name+"-operator", flag.ContinueOnError)
	op.BindFlags(fs, o)
	config.RegisterFlags(fs)
	showVersion := fs.Bool("version", false, "Print the version and exit.")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return nil
		}
		return &UsageError{Err: err}
	}
	if fs.NArg() > 0 {
		err := fmt.Errorf("unexpected arguments: %v", fs.Args())
		fmt.Fprintln(fs.Output(), err)
		fs.Usage()
		return &UsageError{Err: err}
	}
	if *showVersion {
		_, err := fmt.Fprintln(stdout, op.Version)
		return err
	}
	o.Logger()
	log := ctrl.Log.WithName(o.EventSource())
	log.Info("starting", "version", op.Version, "leaderElection", o.LeaderElection, "webhooks", o.EnableWebhooks)
	cfg, err := config.GetConfig()
	if err != nil {
		return fmt.Errorf("connecting to the API server: %w", err)
	}
	mgr, err := op.NewManager(ctx, cfg, o)
	if err != nil {
		return err
	}
	if err := mgr.Start(ctx); err != nil {
		return fmt.Errorf("running the %s manager: %w", op.Name, err)
	}
	log.Info("stopped")
	return nil
}

// Main runs op as the process: it stops cleanly on SIGTERM or SIGINT (a
// second signal exits at once), and exits 0 after a clean stop, 2 for a bad
// command line, 1 for any other error (logged).
func Main(op Operator) {
	os.Exit(ExitCode(op.Run(ctrl.SetupSignalHandler(), os.Args[1:], os.Stdout)))
}

// ExitCode is the process exit code for Run's result: 0 for nil, 2 for a
// UsageError (the flag package has printed it with the usage), else 1 —
// after logging the error (the logger is installed by then).
func ExitCode(err error) int {
	var usage *UsageError
	switch {
	case err == nil:
		return 0
	case errors.As(err, &usage):
		return 2
	default:
		ctrl.Log.Error(err, "exiting")
		return 1
	}
}
