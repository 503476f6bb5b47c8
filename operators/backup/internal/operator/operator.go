// Package operator wires the backup operator for libs/manager: its kinds,
// flags, cache, controller and webhooks. main.go runs it; tests start the
// same wiring in-process (libs/testing/testenv.StartOperator).
package operator

import (
	"context"
	"flag"

	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

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
	var images string
	return manager.Operator{
		Name: "backup", Version: version, AgentImage: DefaultAgentImage, CleanupDeadline: access.BackupJob.CleanupDeadline,
		Access: true, Trusted: []string{access.OrchestratorServiceAccount},
		AddToScheme:   []func(*runtime.Scheme) error{backupv1.AddToScheme, backupv1alpha1.AddToScheme},
		CacheByObject: cacheByObject,
		Setup: func(ctx context.Context, mgr ctrl.Manager, o *manager.Options) error {
			// Artifact deletes of namespaces being deleted run in the
			// operator's own namespace (the pod's, like its Lease; "" outside
			// a pod: those deletes cannot run).
			r := &controller.BackupJobReconciler{Base: reconcile.NewBase(mgr, o.EventSource(), o.CleanupDeadline),
				Agent: agentjob.Agent{AgentImage: o.AgentImage}, OperatorNamespace: o.OperatorNamespace()}
			im, err := agentjob.ParseImages(images)
			if err != nil {
				return err
			}
			r.Images = im
			return r.SetupWithManager(ctx, mgr, o.ControllerOptions())
		},
		Flags: func(fs *flag.FlagSet) {
			fs.StringVar(&images, "agent-images", "", "Agent images per database server, e.g. "+
				"postgres:13=IMG,postgres:17=IMG,postgres:18=IMG,mysql=IMG,mariadb=IMG: a BackupJob whose server "+
				"(status.server) one of them serves runs it (PostgreSQL: the smallest major at least the server's); "+
				"--agent-image otherwise.")
		},
		Webhooks: webhook.Setup,
	}
}

// cacheByObject keeps only the operator's own CronJobs, archiver
// Deployments, Jobs and Pods in
// memory (by ManagedByLabel). CronJobs are cached as metadata only (see
// SetupWithManager); the key here selects them by kind either way. Jobs and
// Pods are cached without their spec, which the controller never reads
// (agentjob.TransformRun). BackupJobs and CronJobs, held one per BackupJob, have their
// repeated short strings interned (manager.TransformStripAndIntern: about
// 0.5 KiB less per BackupJob, issue 16).
func cacheByObject() map[client.Object]cache.ByObject {
	return agentjob.Cache(controller.ManagedByValue, []client.Object{&backupv1.BackupJob{}}, &batchv1.CronJob{}, &appsv1.Deployment{})
}
