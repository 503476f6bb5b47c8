// Command kubectl-cairn is the `kubectl cairn` plugin: the on-call
// engineer's view of Cairn — what is protected, the backups in a store's
// catalog, back up now, restore, verify, approve a cutover, logs. It talks
// to the API server only, with the user's own credentials (kubectl's
// --kubeconfig, --context, -n): never to a database or a store.
package main

import (
	"os"

	"k8s.io/cli-runtime/pkg/genericiooptions"

	"cairn.dev/kubectl-cairn/internal/cmd"
)

// version is stamped at release time (-ldflags "-X main.version=…").
var version = "dev"

func main() {
	streams := genericiooptions.IOStreams{In: os.Stdin, Out: os.Stdout, ErrOut: os.Stderr}
	os.Exit(cmd.Execute(cmd.NewRoot(streams, version), streams))
}
