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
	"cairn.dev/agent/internal/harden"
)

// version is stamped at build time: -ldflags "-X main.version=v1.2.3".
var version = "dev"

func main() {
	// Before anything: no process of the agent's user (a program a
	// restore's temporary server runs, a database tool) may read the
	// secrets in its environment through /proc (internal/harden).
	if err := harden.Seal(); err != nil {
		os.Stderr.WriteString("agent: could not mark the process not dumpable: " + err.Error() + "\n")
	}
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
