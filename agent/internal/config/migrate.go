package config

import (
	"flag"
	"fmt"
	"strconv"

	"cairn.dev/agent/contract"
	"cairn.dev/agent/internal/engine"
	"cairn.dev/agent/internal/naming"
	"cairn.dev/agent/patterns"
)

// Migrate configures a migration step (the contract is cairn.dev/agent/contract).
type Migrate struct {
	Step string
	// Migration is CAIRN_MIGRATION (namespace/name); it is also the store
	// key (Config.BackupJob, in naming.MigrationSpace) of a store transfer.
	Migration naming.Job
	UID       string
	Mode      string // Full, SchemaOnly or Continuous
	Include   string
	Exclude   string
	Filter    *patterns.Filter
	Parallel  int
	// AllowNonEmptyTarget lets precheck pass with included tables on the
	// target.
	AllowNonEmptyTarget bool
	Verify              string // None, RowCount or Checksum
	// SourceReadOnly: cutover makes the source read-only; abort undoes it
	// (the cutover may have run); precheck checks the privileges it needs.
	SourceReadOnly bool
	// WritersStopped: the user declared the source's writers stopped
	// (spec.cutover.writersStopped); a Full cutover may then copy again
	// the tables that changed since verification.
	WritersStopped bool
	// MaxRetainedWALBytes: replication-status fails above it (0: no limit).
	MaxRetainedWALBytes int64
	// Target is the target database (CAIRN_TARGET_DB_*).
	Target engine.Conn
}

// MigrateSteps are the steps of `agent migrate`.
var MigrateSteps = contract.Steps

// migrateFlags are the flags (over CAIRN_MIGRATE_* / CAIRN_TARGET_DB_*
// variables) of `agent migrate <step>`.
type migrateFlags struct {
	c                  Migrate
	migration          string
	targetPasswordFile string
	maxWAL             string
}

func (m *migrateFlags) register(fs *flag.FlagSet, env Env, envInt func(string, int) int, envBool func(string, bool) bool, envStr func(string, string) string) {
	fs.StringVar(&m.migration, "migration", env.get(contract.EnvMigration), "MigrationJob namespace/name: names store artifacts and replication objects (env CAIRN_MIGRATION)")
	fs.StringVar(&m.c.UID, "migration-uid", env.get(contract.EnvMigrationUID), "MigrationJob UID (env CAIRN_MIGRATION_UID)")
	fs.StringVar(&m.c.Mode, "mode", envStr(contract.EnvMode, "Full"), "Full, SchemaOnly or Continuous (env CAIRN_MIGRATE_MODE)")
	fs.StringVar(&m.c.Include, "include", env.get(contract.EnvInclude), "comma-separated schema.table patterns; empty = all (env CAIRN_MIGRATE_INCLUDE)")
	fs.StringVar(&m.c.Exclude, "exclude", env.get(contract.EnvExclude), "comma-separated schema.table patterns; wins over include (env CAIRN_MIGRATE_EXCLUDE)")
	fs.IntVar(&m.c.Parallel, "parallel", envInt(contract.EnvParallel, 4), "tables copied and verified at once, 1..64 (env CAIRN_MIGRATE_PARALLEL)")
	fs.BoolVar(&m.c.AllowNonEmptyTarget, "allow-non-empty-target", envBool(contract.EnvAllowNonEmptyTarget, false), "precheck passes with included tables on the target (env CAIRN_MIGRATE_ALLOW_NON_EMPTY_TARGET)")
	fs.StringVar(&m.c.Verify, "verify", envStr(contract.EnvVerify, "Checksum"), "None, RowCount or Checksum (env CAIRN_MIGRATE_VERIFY)")
	fs.BoolVar(&m.c.SourceReadOnly, "cutover-source-read-only", envBool(contract.EnvCutoverSourceReadOnly, false), "cutover makes the source database read-only (env CAIRN_CUTOVER_SOURCE_READ_ONLY)")
	fs.BoolVar(&m.c.WritersStopped, "cutover-writers-stopped", envBool(contract.EnvCutoverWritersStopped, false), "the source's writers are stopped: a Full cutover copies again the tables that changed since verification (env CAIRN_CUTOVER_WRITERS_STOPPED)")
	fs.StringVar(&m.maxWAL, "max-retained-wal-bytes", env.get(contract.EnvMaxRetainedWALBytes), "replication-status fails when the slot retains more WAL (env CAIRN_REPLICATION_MAX_RETAINED_WAL_BYTES)")
	fs.StringVar(&m.c.Target.Host, "target-db-host", env.get(contract.EnvTargetHost), "target database host (env CAIRN_TARGET_DB_HOST)")
	fs.IntVar(&m.c.Target.Port, "target-db-port", envInt(contract.EnvTargetPort, 0), "target database port (env CAIRN_TARGET_DB_PORT)")
	fs.StringVar(&m.c.Target.Database, "target-db-name", env.get(contract.EnvTargetName), "target database name (env CAIRN_TARGET_DB_NAME)")
	fs.StringVar(&m.c.Target.User, "target-db-user", env.get(contract.EnvTargetUser), "target database user (env CAIRN_TARGET_DB_USER)")
	fs.StringVar(&m.targetPasswordFile, "target-db-password-file", env.get(contract.EnvTargetPasswordFile), "file holding the target password (env CAIRN_TARGET_DB_PASSWORD_FILE; or env CAIRN_TARGET_DB_PASSWORD)")
}

// finish validates the migrate settings into c.Migrate.
func (m *migrateFlags) finish(c *Config, backupJob string) error {
	mc := m.c
	mc.Step = c.Migrate.Step
	switch mc.Mode {
	case "Full", "SchemaOnly", "Continuous":
	default:
		return &UsageError{fmt.Sprintf("migrate mode %q: want Full, SchemaOnly or Continuous", mc.Mode)}
	}
	switch mc.Verify {
	case "None", "RowCount", "Checksum":
	default:
		return &UsageError{fmt.Sprintf("migrate verify %q: want None, RowCount or Checksum", mc.Verify)}
	}
	if mc.Parallel < 1 || mc.Parallel > 64 {
		return &UsageError{fmt.Sprintf("migrate parallel %d: want 1..64", mc.Parallel)}
	}
	f, err := patterns.NewFilter(mc.Include, mc.Exclude)
	if err != nil {
		return &UsageError{"migrate objects: " + err.Error()}
	}
	mc.Filter = f
	if m.maxWAL != "" {
		if mc.MaxRetainedWALBytes, err = strconv.ParseInt(m.maxWAL, 10, 64); err != nil || mc.MaxRetainedWALBytes < 0 {
			return &UsageError{fmt.Sprintf("CAIRN_REPLICATION_MAX_RETAINED_WAL_BYTES=%q is not a non-negative integer", m.maxWAL)}
		}
	}
	if m.migration != "" {
		if mc.Migration, err = naming.ParseJob(m.migration); err != nil {
			return &UsageError{"migration: " + err.Error()}
		}
	}
	if err := engine.CheckConn(mc.Target); err != nil {
		return &UsageError{"target " + err.Error()}
	}
	if c.Engine == "" {
		return &UsageError{"engine is not set: CAIRN_ENGINE or --engine must be postgres or mysql"}
	}
	if mc.Mode == "Continuous" && c.Engine != "postgres" {
		return &UsageError{"migrate mode Continuous is PostgreSQL only"}
	}
	mc.Target.Password = c.Migrate.Target.Password
	*c.Migrate = mc
	return nil
}
