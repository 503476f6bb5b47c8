// Package operator wires the orchestrator for libs/manager: its kinds,
// flags, controller and webhooks. main.go runs it; tests start the same
// wiring in-process (libs/testing/testenv.StartOperator).
package operator

import (
	"context"

	"k8s.io/apimachinery/pkg/runtime"
	ctrl "sigs.k8s.io/controller-runtime"

	backupv1 "cairn.dev/apis/backup/v1"
	migrationv1 "cairn.dev/apis/migration/v1"
	platformv1 "cairn.dev/apis/platform/v1"
	restorev1 "cairn.dev/apis/restore/v1"
	"cairn.dev/libs/access"
	"cairn.dev/libs/manager"
	"cairn.dev/libs/reconcile"
	"cairn.dev/operators/orchestrator/internal/controller"
	"cairn.dev/operators/orchestrator/internal/webhook"
)

// New returns the orchestrator at version.
func New(version string) manager.Operator {
	return manager.Operator{
		Name: "orchestrator", Version: version, CleanupDeadline: access.ProtectionPlan.CleanupDeadline, Access: true,
		AddToScheme: []func(*runtime.Scheme) error{
			backupv1.AddToScheme, restorev1.AddToScheme, migrationv1.AddToScheme, platformv1.AddToScheme,
		},
		Setup: func(ctx context.Context, mgr ctrl.Manager, o *manager.Options) error {
			r := &controller.ProtectionPlanReconciler{Base: reconcile.NewBase(mgr, o.EventSource(), o.CleanupDeadline)}
			return r.SetupWithManager(ctx, mgr, o.ControllerOptions())
		},
		Webhooks: webhook.Setup,
	}
}
