// Package operator wires the backup operator for libs/manager: its kinds,
// flags, cache, controller and webhooks. main.go runs it; tests start the
// same wiring in-process (libs/testenv.StartOperator).
package operator

import (
	"context"
	"flag"
	"os"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/runtime"
	ctrl "sigs.k8s.io/controller-runtime"

	backupv1 "cairn.dev/apis/backup/v1"
	backupv1alpha1 "cairn.dev/apis/backup/v1alpha1"
	"cairn.dev/libs/access"
	"cairn.dev/libs/manager"
	"cairn.dev/operators/backup/internal/controller"
	"cairn.dev/operators/backup/internal/webhook"
)

// DefaultAgentImage is the agent image used when --agent-image is not set.
const DefaultAgentImage = "ghcr.io/cairn-dev/agent:latest"

// New returns the backup operator at version.
func New(version string) manager.Operator {
	var (
		agentImage      string
		cleanupDeadline time.Duration
		guard           access.Options
	)
	return manager.Operator{
		Name:        "backup",
		Version:     version,
		AddToScheme: []func(*runtime.Scheme) error{backupv1.AddToScheme, backupv1alpha1.AddToScheme},
		Flags: func(fs *flag.FlagSet) {
			fs.StringVar(&agentImage, "agent-image", DefaultAgentImage, "Image of the Cairn agent that backup and cleanup pods run.")
			fs.DurationVar(&cleanupDeadline, "cleanup-deadline", 10*time.Minute, "How long after a deletion request cleanup may take before the finalizer is removed anyway.")
			guard.BindFlags(fs, "backup", access.OrchestratorServiceAccount)
		},
		Prepare: func(ctx context.Context, mgr ctrl.Manager, o *manager.Options) error {
			return guard.Prepare(ctx, mgr, o.LeaderElectionNamespace)
		},
		CacheByObject: controller.CacheByObject,
		Setup: func(ctx context.Context, mgr ctrl.Manager, o *manager.Options) error {
			r := &controller.BackupJobReconciler{
				Client: mgr.GetClient(), APIReader: mgr.GetAPIReader(), Scheme: mgr.GetScheme(),
				Recorder: mgr.GetEventRecorder(o.EventSource()), AgentImage: agentImage, CleanupDeadline: cleanupDeadline,
				// Artifact deletes of namespaces being deleted run in the
				// operator's own namespace (the pod's, like its Lease).
				OperatorNamespace: podNamespace(o.LeaderElectionNamespace),
			}
			return r.SetupWithManager(ctx, mgr, o.ControllerOptions())
		},
		Webhooks: webhook.Setup,
	}
}

// podNamespace is ns, or else the namespace of the pod the operator runs in
// ("" outside a pod: deletes for namespaces being deleted cannot run).
func podNamespace(ns string) string {
	if ns != "" {
		return ns
	}
	b, err := os.ReadFile("/var/run/secrets/kubernetes.io/serviceaccount/namespace")
	if err != nil {
		return ""
	}
	return strings.TrimSpace(string(b))
}
