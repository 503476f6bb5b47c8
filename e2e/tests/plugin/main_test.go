// Package plugin_test runs `kubectl cairn` — the binary built from
// kubectl-cairn/, as a user runs it, with the admin's kubeconfig and --as a
// tenant — against the e2e platform with real data: the backup, restore,
// orchestrator and migration operators as local processes, agent pods as
// real containers of the agent image against a real PostgreSQL 15 and S3
// server (versitygw). Each command's effect is checked in the cluster, the
// store and the databases.
package plugin_test

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"cairn.dev/e2e/cluster"
	"cairn.dev/e2e/install"
)

var (
	env *install.Env
	// plugin is the built kubectl-cairn binary.
	plugin string
)

func TestMain(m *testing.M) {
	os.Exit(run(m))
}

func run(m *testing.M) int {
	root, err := cluster.RepoRoot()
	if err != nil {
		fmt.Fprintln(os.Stderr, "e2e:", err)
		return 1
	}
	dir, err := os.MkdirTemp("", "kubectl-cairn-")
	if err != nil {
		fmt.Fprintln(os.Stderr, "e2e:", err)
		return 1
	}
	defer os.RemoveAll(dir)
	plugin = filepath.Join(dir, "kubectl-cairn")
	// CGO off and -trimpath as `make build`: its compiled packages (client-go,
	// cli-runtime, kustomize) serve this build instead of a second compile.
	cmd := exec.Command("go", "build", "-trimpath", "-o", plugin, ".")
	cmd.Dir = filepath.Join(root, "kubectl-cairn")
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := cmd.CombinedOutput(); err != nil {
		fmt.Fprintf(os.Stderr, "e2e: building kubectl-cairn: %v\n%s", err, out)
		return 1
	}
	return install.RunTests(m, install.Options{Nodes: 1, RealData: true,
		Operators: []string{"backup", "restore", "orchestrator", "migration"}}, &env)
}
