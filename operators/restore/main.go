// Command restore-operator runs the Cairn restore operator: it reconciles
// RestoreJobs (restore.cairn.dev) into one Job each, whose pod runs
// `agent restore`, and serves the RestoreJob defaulting and validating
// webhooks.
package main

import (
	"cairn.dev/libs/manager"
	"cairn.dev/operators/restore/internal/operator"
)

// version is stamped at release: -ldflags "-X main.version=vX.Y.Z".
var version = "dev"

func main() { manager.Main(operator.New(version)) }
