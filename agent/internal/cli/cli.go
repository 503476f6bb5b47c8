// Package cli is the agent's command line: it reads the command and its
// configuration, runs the command (cairn.dev/agent/internal/backup for
// backup, restore, list, prune and delete; cairn.dev/agent/internal/migrate
// for a migration's steps), prints the result line and writes it to the
// termination log, and turns a failure into the exit code operators act on.
package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"os"
	"runtime/debug"
	"strings"
	"time"

	"cairn.dev/agent/contract"
	"cairn.dev/agent/internal/backup"
	"cairn.dev/agent/internal/config"
	"cairn.dev/agent/internal/crypt"
	"cairn.dev/agent/internal/engine"
	"cairn.dev/agent/internal/identity"
	"cairn.dev/agent/internal/migrate"
	"cairn.dev/agent/internal/pipeline"
	"cairn.dev/agent/internal/pitr"
	"cairn.dev/agent/internal/toolset"
)

// Options are the process's surroundings, replaceable in tests.
type Options struct {
	Version string
	Stdout  io.Writer
	Stderr  io.Writer
	Env     config.Env
	Now     func() time.Time
}

const usage = `Usage: agent <command> [flags]

Commands:
  backup    dump the database, compressed and checksummed, into the store and add it to the catalog
  restore   verify an artifact's checksum, then restore it into the database (CAIRN_ARTIFACT; default newest)
  list      print the catalog of a BackupJob, one JSON line per artifact (--output=table for people)
  prune     delete artifacts older than CAIRN_RETENTION_DAYS, always keeping the newest
  delete    delete every artifact and the catalog of a BackupJob (deletionPolicy: Delete)
  migrate   one step of a migration: agent migrate precheck|precheck-source|precheck-target|copy|export|
            import|verify|cutover|replication-start|replication-status|replication-stop
  archive   stream a MySQL/MariaDB binary log or a PostgreSQL write-ahead log into the store until
            stopped (point-in-time recovery; restore with CAIRN_RECOVERY_TARGET replays it onto a base
            taken with CAIRN_POINT_IN_TIME)
  archive-status  report the archive (segments, gaps) and the PostgreSQL archiver's replication slot,
            dropping the slot when it retains more than CAIRN_ARCHIVE_MAX_RETAINED_WAL_BYTES
  wal-fetch the restore_command of a point-in-time restore's temporary PostgreSQL server (internal)
  version   print the version (also: agent --version)

Configuration comes from CAIRN_* environment variables; each has a flag that
overrides it (agent <command> --help lists them). Credentials come only from
the environment or mounted files, never from arguments.
`

// Main runs the agent with args (without the program name) and returns the
// process exit code (constants in cairn.dev/agent/result):
//
//   - 0 (contract.ExitOK): success.
//   - 1 (contract.ExitFailure): the command failed; a retry may succeed.
//   - 2 (contract.ExitUsage): the command line or configuration is invalid.
//   - 3 (contract.ExitCorrupted): the artifact failed its integrity check
//     (pipeline.ErrCorrupted).
//
// Operators fail an agent Job at once on 2 and 3 (its podFailurePolicy, see
// cairn.dev/libs/agentjob): running the same Pod again cannot fix them.
func Main(ctx context.Context, args []string, o Options) int {
	if o.Now == nil {
		o.Now = time.Now
	}
	if len(args) == 0 {
		fmt.Fprint(o.Stderr, usage)
		return contract.ExitUsage
	}
	cmd := args[0]
	switch cmd {
	case "--version", "-version", "version":
		fmt.Fprintln(o.Stdout, o.Version)
		return contract.ExitOK
	case "-h", "--help", "help":
		fmt.Fprint(o.Stdout, usage)
		return contract.ExitOK
	case "wal-fetch":
		// The restore_command of a point-in-time restore's temporary
		// PostgreSQL server: no configuration, only its socket.
		return pitr.WALFetch(args[1:], o.Stderr)
	case "backup", "restore", "list", "prune", "delete", "migrate", "archive", "archive-status":
	default:
		fmt.Fprintf(o.Stderr, "agent: unknown command %q\n\n%s", cmd, usage)
		return contract.ExitUsage
	}

	cfg, err := config.Load(cmd, args[1:], o.Env, o.Stdout)
	if errors.Is(err, config.ErrHelp) {
		return contract.ExitOK
	}
	if err != nil {
		// The configuration could not be read: report where the
		// environment says, or at the default path.
		fallback := &config.Config{TerminationLog: config.DefaultTerminationLog}
		if v, _ := o.Env.Lookup(contract.EnvTerminationLog); v != "" {
			fallback.TerminationLog, fallback.TerminationLogSet = v, true
		}
		return fail(o, fallback, cmd, err, nil)
	}
	log := newLogger(o.Stderr, cfg)
	setMemoryLimit(cfg)
	now := func() time.Time { return o.Now().UTC() }
	b := backup.New(cfg, log, now, o.Version, o.Stdout)

	var line []byte
	switch cmd {
	case "backup":
		line, err = b.Backup(ctx)
	case "restore":
		line, err = b.Restore(ctx)
	case "list":
		line, err = b.List(ctx)
	case "prune":
		line, err = b.Prune(ctx)
	case "delete":
		line, err = b.Delete(ctx)
	case "migrate":
		line, err = migrate.New(cfg, log, now, o.Version).Run(ctx)
	case "archive":
		line, err = b.Archive(ctx)
	case "archive-status":
		line, err = b.ArchiveStatus(ctx)
	}
	log.Debug("resources", "peakRSSKiB", peakRSSKiB())
	if err != nil {
		if cfg.Migrate != nil {
			cmd += " " + cfg.Migrate.Step
		}
		return fail(o, cfg, cmd, err, log)
	}
	if cmd != "list" {
		o.Stdout.Write(line)
	}
	writeTerminationLog(cfg, line, log)
	log.Info("done", "command", cmd, "peakRSSKiB", peakRSSKiB())
	return contract.ExitOK
}

func fail(o Options, cfg *config.Config, cmd string, err error, log *slog.Logger) int {
	reason := cmd + " failed: " + err.Error()
	for _, s := range cfg.Secrets() {
		reason = engine.Redact(reason, s)
	}
	reason = strings.Join(strings.Fields(reason), " ")
	fmt.Fprintf(o.Stderr, "agent: %s\n", reason)
	var server *contract.ServerInfo
	if ue := (*toolset.UnsupportedError)(nil); errors.As(err, &ue) {
		server = ue.Server.Info() // the operator records it (status.server)
	}
	writeTerminationLog(cfg, contract.FailureLineServer(reason, contract.FailureCode(err), server), log)
	return exitCode(err)
}

// exitCode classifies a command's error (see Main).
func exitCode(err error) int {
	var ue *config.UsageError
	var same *identity.SameError
	var key *crypt.KeyError
	switch {
	case errors.As(err, &ue), errors.As(err, &same), errors.As(err, &key):
		return contract.ExitUsage
	case errors.Is(err, pipeline.ErrCorrupted):
		return contract.ExitCorrupted
	case errors.As(err, new(*toolset.UnsupportedError)):
		return contract.ExitUnsupported
	}
	return contract.ExitFailure
}

// writeTerminationLog writes the result line to the termination message
// file. At the default path it writes only if the file exists (it does in a
// Pod; outside one the agent does not create files under /dev).
func writeTerminationLog(cfg *config.Config, line []byte, log *slog.Logger) {
	if len(line) > contract.MaxMessageBytes {
		line = contract.FailureLine("result line exceeds the termination message limit", "")
	}
	if !cfg.TerminationLogSet {
		if _, err := os.Stat(cfg.TerminationLog); errors.Is(err, fs.ErrNotExist) {
			return
		}
	}
	if err := os.WriteFile(cfg.TerminationLog, line, 0o644); err != nil && log != nil {
		log.Warn("cannot write the termination message", "path", cfg.TerminationLog, "error", err)
	}
}

// setMemoryLimit gives the Go runtime a soft memory limit sized to what a
// run holds, so garbage from a long upload is collected before it
// inflates the heap. GOMEMLIMIT, when set, wins.
func setMemoryLimit(cfg *config.Config) {
	if _, ok := os.LookupEnv("GOMEMLIMIT"); ok {
		return
	}
	debug.SetMemoryLimit(memoryLimit(cfg))
}

// memoryLimit is the runtime and buffers (24 MiB) plus, for each part in
// flight (CAIRN_PARALLELISM of them; one stream: one), its zstd window and
// buffers (8 MiB) and its S3 part buffer: 32 MiB + the part size for one
// stream. A limit for one stream under a parallel run's live heap (two
// encoders, two part buffers) kept the collector running without pause:
// measured, a PostgreSQL backup in parts spent ~18 % of its CPU in the
// collector (docs/benchmarks-log.md).
func memoryLimit(cfg *config.Config) int64 {
	perStream := int64(8 << 20)
	if cfg.Store == "s3" {
		perStream += int64(cfg.S3.PartSize)
	}
	return 24<<20 + int64(max(cfg.Parallelism, 1))*perStream
}

func newLogger(w io.Writer, cfg *config.Config) *slog.Logger {
	var level slog.Level
	if err := level.UnmarshalText([]byte(cfg.LogLevel)); err != nil {
		level = slog.LevelInfo
	}
	opts := &slog.HandlerOptions{Level: level}
	var h slog.Handler = slog.NewTextHandler(w, opts)
	if cfg.LogFormat == "json" {
		h = slog.NewJSONHandler(w, opts)
	}
	return slog.New(h).With("backupJob", cfg.BackupJob.String())
}
