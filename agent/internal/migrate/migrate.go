// Package migrate is the agent's migration engine: the steps of a
// MigrationJob (docs/migration-agent.md), each run by one agent process and
// safe to run again after a failure or a kill.
//
//   - precheck (precheck*.go): what would make the copy fail, on each side;
//   - copy, direct transfer: PostgreSQL (postgres_copy.go: pg_dump's schema
//     sections around a parallel COPY in one exported snapshot) and
//     MySQL/MariaDB (mysql_copy.go, mysql_rows.go: the schema by mysqldump,
//     the rows in parallel in one snapshot as multi-row INSERTs);
//   - export and import, transfer through a store (store_transfer.go), with the
//     artifacts of cairn.dev/agent/internal/backup;
//   - verify (verify.go; converge.go for Continuous mode, comparing at WAL
//     positions the target has applied);
//   - cutover (cutover.go, readonly.go, recopy.go) and abort;
//   - replication-start/-status/-stop, PostgreSQL logical replication for
//     Continuous mode (replication.go, replication_stop.go).
package migrate

import (
	"context"
	"fmt"
	"log/slog"
	"strings"
	"time"

	"cairn.dev/agent/contract"
	"cairn.dev/agent/internal/backup"
	"cairn.dev/agent/internal/config"
	"cairn.dev/agent/internal/engine"
	"cairn.dev/agent/internal/identity"
	"cairn.dev/agent/internal/inventory"
)

// Migration runs one step of a migration, configured by cfg (cfg.Migrate
// set: the step and the migration's settings).
type Migration struct {
	cfg     *config.Config
	log     *slog.Logger
	now     func() time.Time
	version string
	// backup writes and reads the store transfer's artifacts.
	backup *backup.Runner
}

// New returns the Migration of cfg's step. It logs to log (with the step
// and the migration's name), reads the time from now and records version
// in the artifacts it exports.
func New(cfg *config.Config, log *slog.Logger, now func() time.Time, version string) *Migration {
	log = log.With("step", cfg.Migrate.Step, "migration", cfg.Migrate.Migration.String())
	return &Migration{cfg: cfg, log: log, now: now, version: version, backup: backup.New(cfg, log, now, version, nil)}
}

// Run runs the step and returns its result line (the contract is
// cairn.dev/agent/contract's MigrationResult; docs/migration-agent.md
// describes each step).
func (mig *Migration) Run(ctx context.Context) ([]byte, error) {
	m := mig.cfg.Migrate
	start := mig.now()
	res := contract.MigrationResult{Step: m.Step, Engine: mig.cfg.Engine}
	var err error
	switch m.Step {
	case contract.StepPrecheck:
		err = mig.precheck(ctx, &res, true, true)
	case contract.StepPrecheckSource:
		err = mig.precheck(ctx, &res, true, false)
	case contract.StepPrecheckTarget:
		err = mig.precheck(ctx, &res, false, true)
	case contract.StepCopy:
		err = mig.copyStep(ctx, &res)
	case contract.StepExport:
		err = mig.exportStep(ctx, &res)
	case contract.StepImport:
		err = mig.importStep(ctx, &res)
	case contract.StepVerify:
		err = mig.verifyStep(ctx, &res)
	case contract.StepCutover:
		err = mig.cutoverStep(ctx, &res)
	case contract.StepReplicationStart, contract.StepReplicationStatus, contract.StepReplicationStop:
		err = mig.replicationStep(ctx, &res)
	case contract.StepAbort:
		err = mig.abortStep(ctx, &res)
	default:
		err = &config.UsageError{Msg: fmt.Sprintf("unknown migrate step %q", m.Step)}
	}
	if err != nil {
		return nil, err
	}
	res.DurationSeconds = backup.Seconds(mig.now().Sub(start))
	mig.log.Info("step finished", "tables", res.Tables, "tablesDone", res.TablesDone, "bytes", res.Bytes,
		"problems", len(res.Problems), "durationSeconds", res.DurationSeconds)
	return contract.MarshalMigration(res)
}

// source and target return the coordinates of each side, or a usage error
// naming what is missing.
func (mig *Migration) source() (engine.Conn, error) {
	return completeConn("source", "CAIRN_DB_", mig.cfg.Engine, mig.cfg.DB)
}

func (mig *Migration) target() (engine.Conn, error) {
	return completeConn("target", "CAIRN_TARGET_DB_", mig.cfg.Engine, mig.cfg.Migrate.Target)
}

func completeConn(side, prefix, eng string, c engine.Conn) (engine.Conn, error) {
	var missing []string
	if c.Host == "" {
		missing = append(missing, prefix+"HOST")
	}
	if c.Database == "" {
		missing = append(missing, prefix+"NAME")
	}
	if c.User == "" {
		missing = append(missing, prefix+"USER")
	}
	if len(missing) > 0 {
		return c, &config.UsageError{Msg: fmt.Sprintf("%s database: %s not set", side, strings.Join(missing, ", "))}
	}
	if c.Port == 0 {
		c.Port = 5432
		if eng == "mysql" {
			c.Port = 3306
		}
	}
	return c, nil
}

// refuseSamePair refuses a write step of a migration whose target is its
// source, as the two servers tell (identity.CheckPair). Every step that
// writes calls it first.
func (mig *Migration) refuseSamePair(ctx context.Context, step string) error {
	sc, err := mig.source()
	if err != nil {
		return err
	}
	tc, err := mig.target()
	if err != nil {
		return err
	}
	return identity.CheckPair(ctx, mig.cfg.Engine, step, sc, tc)
}

// schemaName is the name the schema part of a pattern matches for
// MySQL/MariaDB on both sides: the source database's name (the target's
// when a target-side step is not told the source's).
func (mig *Migration) schemaName() string {
	if mig.cfg.Engine != "mysql" {
		return ""
	}
	if mig.cfg.DB.Database != "" {
		return mig.cfg.DB.Database
	}
	return mig.cfg.Migrate.Target.Database
}

func (mig *Migration) invOptions(method string) inventory.Options {
	return inventory.Options{Filter: mig.cfg.Migrate.Filter, Method: method, Parallel: mig.cfg.Migrate.Parallel, SchemaName: mig.schemaName()}
}
