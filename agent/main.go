// Command agent is Cairn's data mover, run inside the Job pods of the Cairn
// operators: it backs PostgreSQL and MySQL/MariaDB databases up to a PVC or
// an S3-compatible bucket, restores them, and keeps a catalog of artifacts
// in the store. See README.md.
package main

import (
	"context"
	"os"
	"os/signal"
	"syscall"

	"cairn.dev/agent/internal/cli"
	"cairn.dev/agent/internal/config"
)

// version is stamped at build time: -ldflags "-X main.version=v1.2.3".
var version = "dev"

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	code := cli.Main(ctx, os.Args[1:], cli.Options{
		Version: version,
		Stdout:  os.Stdout,
		Stderr:  os.Stderr,
		Env:     config.Env{Lookup: os.LookupEnv, ReadFile: os.ReadFile},
	})
	stop()
	os.Exit(code)
}
