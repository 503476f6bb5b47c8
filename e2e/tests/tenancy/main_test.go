// Package tenancy_test checks, on a full cluster with the platform installed
// from `kustomize build platform` (real RBAC, kube-controller-manager's role
// aggregation, the ValidatingAdmissionPolicies), what two tenants sharing it
// can and cannot reach, impersonating each (docs/security.md). kwok nodes:
// no pod needs to run. Run it alone: `go test ./e2e/tests/tenancy`.
package tenancy_test

import (
	"os"
	"testing"

	"cairn.dev/e2e/install"
)

var env *install.Env

func TestMain(m *testing.M) {
	// The backup operator serves the BackupJob webhooks tenants' creates go
	// through; the orchestrator's ProtectionPlan webhook has the migration
	// operator's admission judge a plan's MigrationJob.
	os.Exit(install.RunTests(m, install.Options{Nodes: 1, Operators: []string{"backup", "migration", "orchestrator"}}, &env))
}
