// Package migration_test migrates a real database through Kubernetes: the
// migration operator (a local process, as in every e2e package) renders one
// agent Job per step, the full control plane runs them, and their pods run
// as real containers of the agent image (`make images`; `agent migrate`) on
// the pod runner's node against a real PostgreSQL 15 the harness starts. The
// test compares the target with the source itself (row counts and a content
// checksum per table, e2e/dbcheck), independently of the operator's
// verification. Run it alone: `go test ./e2e/tests/migration`.
package migration_test

import (
	"os"
	"testing"

	"cairn.dev/e2e/install"
)

var env *install.Env

func TestMain(m *testing.M) {
	os.Exit(install.RunTests(m, install.Options{Nodes: 1, RealData: true, Operators: []string{"migration"}}, &env))
}
