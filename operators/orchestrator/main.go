// Command orchestrator-operator runs the Cairn orchestrator: it reconciles
// ProtectionPlans (platform.cairn.dev) into an owned BackupJob and
// verification RestoreJobs, summarises them into whether the database is
// recoverable, and serves the ProtectionPlan defaulting and validating
// webhooks. It writes child objects and reads their status only; the backup
// and restore operators do the work.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"time"

	"k8s.io/apimachinery/pkg/runtime"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	ctrl "sigs.k8s.io/controller-runtime"

	backupv1 "cairn.dev/apis/backup/v1"
	platformv1 "cairn.dev/apis/platform/v1"
	restorev1 "cairn.dev/apis/restore/v1"
	"cairn.dev/libs/manager"
	"cairn.dev/operators/orchestrator/internal/controller"
	"cairn.dev/operators/orchestrator/internal/webhook"
)

// version is stamped at release: -ldflags "-X main.version=vX.Y.Z".
var version = "dev"

// EventSource names the operator in the Events it emits.
const EventSource = "orchestrator-operator"

// Scheme has every kind the operator reads or writes.
func Scheme() *runtime.Scheme {
	s := runtime.NewScheme()
	utilruntime.Must(clientgoscheme.AddToScheme(s))
	utilruntime.Must(backupv1.AddToScheme(s))
	utilruntime.Must(restorev1.AddToScheme(s))
	utilruntime.Must(platformv1.AddToScheme(s))
	return s
}

func main() {
	opts := manager.New("orchestrator")
	opts.BindFlags(flag.CommandLine)
	cleanupDeadline := flag.Duration("cleanup-deadline", controller.DefaultCleanupDeadline, "How long after a deletion request removing the plan's children may take before the finalizer is removed anyway.")
	showVersion := flag.Bool("version", false, "Print the version and exit.")
	flag.Parse()
	if *showVersion {
		fmt.Println(version)
		return
	}
	if err := run(ctrl.SetupSignalHandler(), opts, *cleanupDeadline); err != nil {
		ctrl.Log.WithName(EventSource).Error(err, "exiting")
		os.Exit(1)
	}
}

func run(ctx context.Context, opts *manager.Options, cleanupDeadline time.Duration) error {
	opts.Logger()
	ctrl.Log.WithName(EventSource).Info("starting", "version", version)
	mgr, err := opts.NewManager(ctrl.GetConfigOrDie(), Scheme(), nil)
	if err != nil {
		return err
	}
	r := &controller.ProtectionPlanReconciler{
		Client: mgr.GetClient(), APIReader: mgr.GetAPIReader(), Scheme: mgr.GetScheme(),
		Recorder: mgr.GetEventRecorder(EventSource), CleanupDeadline: cleanupDeadline,
	}
	if err := r.SetupWithManager(mgr, opts.ControllerOptions()); err != nil {
		return fmt.Errorf("setting up the ProtectionPlan controller: %w", err)
	}
	if opts.EnableWebhooks {
		if err := webhook.Setup(mgr); err != nil {
			return fmt.Errorf("setting up the webhooks: %w", err)
		}
	}
	return mgr.Start(ctx)
}
