// Command backup-operator runs the Cairn backup operator: it reconciles
// BackupJobs (backup.cairn.dev) into CronJobs whose pods run the Cairn agent,
// and serves the BackupJob defaulting, validation and conversion webhooks.
package main

import (
	"cairn.dev/libs/manager"
	"cairn.dev/operators/backup/internal/operator"
)

// version is stamped at release: -ldflags "-X main.version=vX.Y.Z".
var version = "dev"

func main() { manager.Main(operator.New(version)) }
