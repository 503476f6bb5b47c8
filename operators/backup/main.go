// Command backup-operator runs the Cairn backup operator: it reconciles
// BackupJobs (backup.cairn.dev) into CronJobs whose pods run the Cairn agent,
// and serves the BackupJob defaulting, validation and conversion webhooks.
package main

import (
	"flag"
	"fmt"
	"os"
	"time"

	"k8s.io/apimachinery/pkg/runtime"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	ctrl "sigs.k8s.io/controller-runtime"

	backupv1 "cairn.dev/apis/backup/v1"
	backupv1alpha1 "cairn.dev/apis/backup/v1alpha1"
	"cairn.dev/libs/manager"
	"cairn.dev/operators/backup/internal/controller"
	"cairn.dev/operators/backup/internal/webhook"
)

// version is stamped at release: -ldflags "-X main.version=vX.Y.Z".
var version = "dev"

// DefaultAgentImage is the agent image used when --agent-image is not set.
const DefaultAgentImage = "ghcr.io/cairn-dev/agent:latest"

// Scheme has every kind the operator reads or writes.
func Scheme() *runtime.Scheme {
	s := runtime.NewScheme()
	utilruntime.Must(clientgoscheme.AddToScheme(s))
	utilruntime.Must(backupv1.AddToScheme(s))
	utilruntime.Must(backupv1alpha1.AddToScheme(s))
	return s
}

func main() {
	opts := manager.New("backup")
	opts.BindFlags(flag.CommandLine)
	agentImage := flag.String("agent-image", DefaultAgentImage, "Image of the Cairn agent that backup and cleanup pods run.")
	cleanupDeadline := flag.Duration("cleanup-deadline", 10*time.Minute, "How long after a deletion request cleanup may take before the finalizer is removed anyway.")
	showVersion := flag.Bool("version", false, "Print the version and exit.")
	flag.Parse()
	if *showVersion {
		fmt.Println(version)
		return
	}
	opts.Logger()
	log := ctrl.Log.WithName("backup-operator")
	log.Info("starting", "version", version, "agentImage", *agentImage)

	mgr, err := opts.NewManager(ctrl.GetConfigOrDie(), Scheme(), controller.CacheByObject())
	if err != nil {
		log.Error(err, "creating the manager")
		os.Exit(1)
	}
	r := &controller.BackupJobReconciler{
		Client: mgr.GetClient(), APIReader: mgr.GetAPIReader(), Scheme: mgr.GetScheme(),
		Recorder: mgr.GetEventRecorder("backup-operator"), AgentImage: *agentImage, CleanupDeadline: *cleanupDeadline,
	}
	if err := r.SetupWithManager(mgr, opts.ControllerOptions()); err != nil {
		log.Error(err, "setting up the BackupJob controller")
		os.Exit(1)
	}
	if opts.EnableWebhooks {
		if err := webhook.Setup(mgr); err != nil {
			log.Error(err, "setting up the webhooks")
			os.Exit(1)
		}
	}
	if err := mgr.Start(ctrl.SetupSignalHandler()); err != nil {
		log.Error(err, "running the manager")
		os.Exit(1)
	}
}
