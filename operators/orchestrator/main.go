// Command orchestrator-operator will run the Cairn orchestrator operator. Its kinds and
// controllers land with their own issue; until then it starts a manager with
// no controllers (leader election, health probes and metrics only), so the
// module, image and flags exist and build.
package main

import (
	"flag"
	"fmt"
	"os"

	"k8s.io/apimachinery/pkg/runtime"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	ctrl "sigs.k8s.io/controller-runtime"

	"cairn.dev/libs/manager"
)

// version is stamped at release: -ldflags "-X main.version=vX.Y.Z".
var version = "dev"

func main() {
	opts := manager.New("orchestrator")
	opts.EnableWebhooks = false
	opts.BindFlags(flag.CommandLine)
	showVersion := flag.Bool("version", false, "Print the version and exit.")
	flag.Parse()
	if *showVersion {
		fmt.Println(version)
		return
	}
	opts.Logger()
	scheme := runtime.NewScheme()
	utilruntime.Must(clientgoscheme.AddToScheme(scheme))
	mgr, err := opts.NewManager(ctrl.GetConfigOrDie(), scheme, nil)
	if err != nil {
		ctrl.Log.Error(err, "creating the manager")
		os.Exit(1)
	}
	if err := mgr.Start(ctrl.SetupSignalHandler()); err != nil {
		ctrl.Log.Error(err, "running the manager")
		os.Exit(1)
	}
}
