package cli

import (
	"context"

	"cairn.dev/agent/internal/config"
	"cairn.dev/agent/result"
)

func (a *app) replicationStep(ctx context.Context, res *result.MigrationResult) error {
	return &config.UsageError{Msg: "migrate " + a.cfg.Migrate.Step + ": Continuous mode is not implemented by this agent version"}
}
