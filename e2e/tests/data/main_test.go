// Package data_test backs up and restores real databases through
// Kubernetes: the backup and restore operators (local processes, as in every
// e2e package) render agent Jobs, the full control plane schedules and runs
// them, and their pods run as real containers of the agent image (`make
// images`) on the pod runner's node (e2e/podrunner), against a real
// PostgreSQL 15, MariaDB and S3 server (versitygw) the harness starts. The
// tests compare the restored tables with the source (row counts and a
// content checksum per table) and look at the real artifacts in the stores.
package data_test

import (
	"os"
	"testing"

	"cairn.dev/e2e/install"
)

var env *install.Env

func TestMain(m *testing.M) {
	os.Exit(install.RunTests(m, install.Options{Nodes: 1, RealData: true, Operators: []string{"backup", "restore", "orchestrator"}}, &env))
}
