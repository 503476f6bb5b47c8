// Package operator wires the restore operator for libs/manager: its kinds,
// flags, cache, controller and webhooks. main.go runs it; tests start the
// same wiring in-process (libs/testing/testenv.StartOperator).
package operator

import (
	"context"
	"flag"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"time"

	"k8s.io/apimachinery/pkg/runtime"
	ctrl "sigs.k8s.io/controller-runtime"

	backupv1 "cairn.dev/apis/backup/v1"
	restorev1 "cairn.dev/apis/restore/v1"
	"cairn.dev/libs/access"
	"cairn.dev/libs/agentjob"
	"cairn.dev/libs/manager"
	"cairn.dev/libs/reconcile"
	"cairn.dev/operators/restore/internal/controller"
	"cairn.dev/operators/restore/internal/webhook"
)

// DefaultAgentImage is the agent image used when --agent-image is not set.
const DefaultAgentImage = "ghcr.io/cairn-dev/agent:latest"

// New returns the restore operator at version.
func New(version string) manager.Operator {
	var waitInterval time.Duration
	return manager.Operator{
		Name: "restore", Version: version, AgentImage: DefaultAgentImage, CleanupDeadline: access.RestoreJob.CleanupDeadline,
		Access: true, Trusted: []string{access.OrchestratorServiceAccount},
		AddToScheme: []func(*runtime.Scheme) error{backupv1.AddToScheme, restorev1.AddToScheme},
		Flags: func(fs *flag.FlagSet) {
			fs.DurationVar(&waitInterval, "source-wait-interval", controller.DefaultWaitInterval, "How often a RestoreJob waiting for its BackupJob or its first backup looks again (BackupJob events also wake it).")
		},
		CacheByObject: cacheByObject,
		Setup: func(ctx context.Context, mgr ctrl.Manager, o *manager.Options) error {
			r := &controller.RestoreJobReconciler{Base: reconcile.NewBase(mgr, o.EventSource(), o.CleanupDeadline),
				Agent: agentjob.Agent{AgentImage: o.AgentImage}, WaitInterval: waitInterval}
			return r.SetupWithManager(ctx, mgr, o.ControllerOptions())
		},
		Webhooks: webhook.Setup,
	}
}

// cacheByObject keeps only the operator's own Jobs and Pods in memory, and
// those without their spec (agentjob.TransformRun): the controller reads a
// cached Job's metadata and status only (a lost status.artifact is read
// from the Job past the cache). RestoreJobs and BackupJobs, one or more per
// RestoreJob, have their repeated short strings interned.
func cacheByObject() map[client.Object]cache.ByObject {
	return agentjob.Cache(controller.ManagedByValue, []client.Object{&restorev1.RestoreJob{}, &backupv1.BackupJob{}})
}
