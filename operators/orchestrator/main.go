// Command orchestrator-operator runs the Cairn orchestrator: it reconciles
// ProtectionPlans (platform.cairn.dev) into an owned BackupJob and
// verification RestoreJobs, summarises them into whether the database is
// recoverable, and serves the ProtectionPlan defaulting and validating
// webhooks. It writes child objects and reads their status only; the backup
// and restore operators do the work.
package main

import (
	"cairn.dev/libs/manager"
	"cairn.dev/operators/orchestrator/internal/operator"
)

// version is stamped at release: -ldflags "-X main.version=vX.Y.Z".
var version = "dev"

func main() { manager.Main(operator.New(version)) }
