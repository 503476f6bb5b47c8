// Package operator wires the backup operator for libs/manager: its kinds,
// flags, cache, controller and webhooks. main.go runs it; tests start the
// same wiring in-process (libs/testing/testenv.StartOperator).
package operator

import (
	"context"

	"k8s.io/apimachinery/pkg/runtime"
	ctrl "sigs.k8s.io/controller-runtime"

	backupv1 "cairn.dev/apis/backup/v1"
	backupv1alpha1 "cairn.dev/apis/backup/v1alpha1"
	"cairn.dev/libs/access"
	"cairn.dev/libs/agentjob"
	"cairn.dev/libs/manager"
	"cairn.dev/libs/reconcile"
	"cairn.dev/operators/backup/internal/controller"
	"cairn.dev/operators/backup/internal/webhook"
)

// DefaultAgentImage is the agent image used when --agent-image is not set.
const DefaultAgentImage = "ghcr.io/cairn-dev/agent:latest"

// New returns the backup operator at version.
func New(version string) manager.Operator {
	return manager.Operator{
		Name: "backup", Version: version, AgentImage: DefaultAgentImage, CleanupDeadline: controller.DefaultCleanupDeadline,
		Access: true, Trusted: []string{access.OrchestratorServiceAccount},
		AddToScheme:   []func(*runtime.Scheme) error{backupv1.AddToScheme, backupv1alpha1.AddToScheme},
		CacheByObject: controller.CacheByObject,
		Setup: func(ctx context.Context, mgr ctrl.Manager, o *manager.Options) error {
			// Artifact deletes of namespaces being deleted run in the
			// operator's own namespace (the pod's, like its Lease; "" outside
			// a pod: those deletes cannot run).
			r := &controller.BackupJobReconciler{Base: reconcile.NewBase(mgr, o.EventSource(), o.CleanupDeadline),
				Agent: agentjob.Agent{AgentImage: o.AgentImage}, OperatorNamespace: o.OperatorNamespace()}
			return r.SetupWithManager(ctx, mgr, o.ControllerOptions())
		},
		Webhooks: webhook.Setup,
	}
}
