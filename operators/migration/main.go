// Command migration-operator runs the Cairn migration operator: it
// reconciles MigrationJobs (migration.cairn.dev) into one agent Job per step
// (`agent migrate <step>`), in this cluster and, for a Store transfer to
// another cluster, in the target cluster, and serves the MigrationJob
// defaulting and validating webhooks.
package main

import (
	"cairn.dev/libs/manager"
	"cairn.dev/operators/migration/internal/operator"
)

// version is stamped at release: -ldflags "-X main.version=vX.Y.Z".
var version = "dev"

func main() { manager.Main(operator.New(version)) }
