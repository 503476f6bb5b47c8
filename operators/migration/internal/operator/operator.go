// Package operator wires the migration operator for libs/manager: its kind,
// flags, cache, controller and webhooks. main.go runs it; tests start the
// same wiring in-process (libs/testing/testenv.StartOperator).
package operator

import (
	"context"
	"flag"
	"fmt"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/runtime"
	ctrl "sigs.k8s.io/controller-runtime"

	migrationv1 "cairn.dev/apis/migration/v1"
	"cairn.dev/libs/access"
	"cairn.dev/libs/agentjob"
	"cairn.dev/libs/manager"
	"cairn.dev/libs/reconcile"
	"cairn.dev/operators/migration/internal/controller"
	"cairn.dev/operators/migration/internal/webhook"
)

// DefaultAgentImage is the agent image used when --agent-image is not set.
const DefaultAgentImage = "ghcr.io/cairn-dev/agent:latest"

// New returns the migration operator at version.
func New(version string) manager.Operator {
	var (
		allowedImages                     []string
		pollInterval, replicationInterval time.Duration
		images                            *access.Images
	)
	return manager.Operator{
		Name: "migration", Version: version, AgentImage: DefaultAgentImage, CleanupDeadline: access.MigrationJob.CleanupDeadline,
		Access: true, Trusted: []string{access.OrchestratorServiceAccount},
		AddToScheme: []func(*runtime.Scheme) error{migrationv1.AddToScheme},
		Flags: func(fs *flag.FlagSet) {
			fs.DurationVar(&pollInterval, "poll-interval", controller.DefaultPollInterval, "How often Jobs in a target cluster (not watched) are looked at, and a waiting MigrationJob looks again.")
			fs.DurationVar(&replicationInterval, "replication-interval", controller.DefaultReplicationInterval, "How often a Continuous migration checks its replication (lag, retained WAL).")
			fs.Func("allowed-agent-images", "Comma-separated images spec.image may name, as repository[:tag][@digest] (default: --agent-image only). "+
				"A digest-pinned entry matches only that digest.", func(v string) error {
				allowedImages = strings.Split(v, ",")
				_, err := access.ParseImages(allowedImages)
				return err
			})
		},
		CacheByObject: cacheByObject,
		Prepare: func(ctx context.Context, mgr ctrl.Manager, o *manager.Options) error {
			list := allowedImages
			if len(list) == 0 {
				list = []string{o.AgentImage}
			}
			var err error
			if images, err = access.ParseImages(list); err != nil {
				return fmt.Errorf("--allowed-agent-images: %w", err)
			}
			return nil
		},
		Setup: func(ctx context.Context, mgr ctrl.Manager, o *manager.Options) error {
			r := &controller.MigrationJobReconciler{Base: reconcile.NewBase(mgr, o.EventSource(), o.CleanupDeadline),
				AllowedImages: images, Agent: agentjob.Agent{AgentImage: o.AgentImage}, PollInterval: pollInterval, ReplicationInterval: replicationInterval}
			return r.SetupWithManager(ctx, mgr, o.ControllerOptions())
		},
		Webhooks: func(mgr ctrl.Manager) error { return webhook.Setup(mgr, images) },
	}
}

// cacheByObject keeps only the operator's own Jobs and Pods in memory, and
// those without their spec (agentjob.TransformRun): the controller reads a
// cached Job's metadata and status only. MigrationJobs have their repeated
// short strings interned.
func cacheByObject() map[client.Object]cache.ByObject {
	return agentjob.Cache(controller.ManagedByValue, []client.Object{&migrationv1.MigrationJob{}})
}
