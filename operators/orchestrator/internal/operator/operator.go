// Package operator wires the orchestrator for libs/manager: its kinds,
// flags, controller and webhooks. main.go runs it; tests start the same
// wiring in-process (libs/testenv.StartOperator).
package operator

import (
	"context"
	"flag"
	"time"

	"k8s.io/apimachinery/pkg/runtime"
	ctrl "sigs.k8s.io/controller-runtime"

	backupv1 "cairn.dev/apis/backup/v1"
	migrationv1 "cairn.dev/apis/migration/v1"
	platformv1 "cairn.dev/apis/platform/v1"
	restorev1 "cairn.dev/apis/restore/v1"
	"cairn.dev/libs/access"
	"cairn.dev/libs/manager"
	"cairn.dev/operators/orchestrator/internal/controller"
	"cairn.dev/operators/orchestrator/internal/webhook"
)

// New returns the orchestrator at version.
func New(version string) manager.Operator {
	var (
		cleanupDeadline time.Duration
		guard           access.Options
	)
	return manager.Operator{
		Name:    "orchestrator",
		Version: version,
		AddToScheme: []func(*runtime.Scheme) error{
			backupv1.AddToScheme, restorev1.AddToScheme, migrationv1.AddToScheme, platformv1.AddToScheme,
		},
		Flags: func(fs *flag.FlagSet) {
			fs.DurationVar(&cleanupDeadline, "cleanup-deadline", controller.DefaultCleanupDeadline, "How long after a deletion request removing the plan's children may take before the finalizer is removed anyway.")
			guard.BindFlags(fs, "orchestrator")
		},
		Prepare: func(ctx context.Context, mgr ctrl.Manager, o *manager.Options) error {
			return guard.Prepare(ctx, mgr, o.LeaderElectionNamespace)
		},
		Setup: func(ctx context.Context, mgr ctrl.Manager, o *manager.Options) error {
			r := &controller.ProtectionPlanReconciler{
				Client: mgr.GetClient(), APIReader: mgr.GetAPIReader(), Scheme: mgr.GetScheme(),
				Recorder: mgr.GetEventRecorder(o.EventSource()), CleanupDeadline: cleanupDeadline,
			}
			return r.SetupWithManager(ctx, mgr, o.ControllerOptions())
		},
		Webhooks: webhook.Setup,
	}
}
