// Command restore-operator runs the Cairn restore operator: it reconciles
// RestoreJobs (restore.cairn.dev) into one Job each, whose pod runs
// `agent restore`, and serves the RestoreJob defaulting and validating
// webhooks.
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
	restorev1 "cairn.dev/apis/restore/v1"
	"cairn.dev/libs/manager"
	"cairn.dev/operators/restore/internal/controller"
	"cairn.dev/operators/restore/internal/webhook"
)

// version is stamped at release: -ldflags "-X main.version=vX.Y.Z".
var version = "dev"

// DefaultAgentImage is the agent image used when --agent-image is not set.
const DefaultAgentImage = "ghcr.io/cairn-dev/agent:latest"

// EventSource names the operator in the Events it emits.
const EventSource = "restore-operator"

// Scheme has every kind the operator reads or writes.
func Scheme() *runtime.Scheme {
	s := runtime.NewScheme()
	utilruntime.Must(clientgoscheme.AddToScheme(s))
	utilruntime.Must(backupv1.AddToScheme(s))
	utilruntime.Must(restorev1.AddToScheme(s))
	return s
}

func main() {
	opts := manager.New("restore")
	opts.BindFlags(flag.CommandLine)
	agentImage := flag.String("agent-image", DefaultAgentImage, "Image of the Cairn agent that restore pods run.")
	waitInterval := flag.Duration("source-wait-interval", controller.DefaultWaitInterval, "How often a RestoreJob waiting for its BackupJob or its first backup looks again (BackupJob events also wake it).")
	cleanupDeadline := flag.Duration("cleanup-deadline", controller.DefaultCleanupDeadline, "How long after a deletion request removing the restore Job may take before the finalizer is removed anyway.")
	showVersion := flag.Bool("version", false, "Print the version and exit.")
	flag.Parse()
	if *showVersion {
		fmt.Println(version)
		return
	}
	if err := run(ctrl.SetupSignalHandler(), opts, *agentImage, *waitInterval, *cleanupDeadline); err != nil {
		ctrl.Log.WithName(EventSource).Error(err, "exiting")
		os.Exit(1)
	}
}

func run(ctx context.Context, opts *manager.Options, agentImage string, waitInterval, cleanupDeadline time.Duration) error {
	opts.Logger()
	log := ctrl.Log.WithName(EventSource)
	log.Info("starting", "version", version, "agentImage", agentImage)

	mgr, err := opts.NewManager(ctrl.GetConfigOrDie(), Scheme(), controller.CacheByObject())
	if err != nil {
		return err
	}
	r := &controller.RestoreJobReconciler{
		Client: mgr.GetClient(), APIReader: mgr.GetAPIReader(), Scheme: mgr.GetScheme(),
		Recorder: mgr.GetEventRecorder(EventSource), AgentImage: agentImage,
		WaitInterval: waitInterval, CleanupDeadline: cleanupDeadline,
	}
	if err := r.SetupWithManager(ctx, mgr, opts.ControllerOptions()); err != nil {
		return fmt.Errorf("setting up the RestoreJob controller: %w", err)
	}
	if opts.EnableWebhooks {
		if err := webhook.Setup(mgr); err != nil {
			return fmt.Errorf("setting up the webhooks: %w", err)
		}
	}
	return mgr.Start(ctx)
}
