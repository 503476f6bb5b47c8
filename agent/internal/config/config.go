// Package config reads the agent's configuration from the environment and
// command-line flags; a flag overrides its environment variable.
//
// Credentials come only from the environment or from mounted files
// (CAIRN_DB_PASSWORD / CAIRN_DB_PASSWORD_FILE, AWS_ACCESS_KEY_ID /
// AWS_SECRET_ACCESS_KEY and their _FILE variants). No flag takes a secret:
// arguments are visible to every process on the node and in the Pod spec.
package config

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"
	"time"
	// The agent image may lack the zone database; CAIRN_TIME_ZONE needs it.
	_ "time/tzdata"

	"cairn.dev/agent/contract"
	"cairn.dev/agent/internal/checks"
	"cairn.dev/agent/internal/crypt"
	"cairn.dev/agent/internal/engine"
	"cairn.dev/agent/internal/naming"
	"cairn.dev/agent/internal/store"
)

// DefaultTerminationLog is Kubernetes' default terminationMessagePath.
const DefaultTerminationLog = "/dev/termination-log"

// Config is the agent's configuration for one command.
type Config struct {
	Command string

	Engine string
	DB     engine.Conn

	Store   string // "pvc" or "s3"
	PVCPath string
	S3      store.S3Config
	// LockDays: artifacts are locked (S3.LockMode) until their start +
	// this many days.
	LockDays int

	BackupJob     naming.Job
	RetentionDays int
	// Retention is the calendar-tier policy (CAIRN_RETENTION), the other
	// form of retention; TimeZone is where its periods are counted
	// (CAIRN_TIME_ZONE, default UTC).
	Retention *contract.Retention
	TimeZone  *time.Location
	// PruneDryRun: prune reports and deletes nothing (CAIRN_PRUNE_DRY_RUN).
	PruneDryRun bool
	// RecordVerification: a restore whose checks passed records it in the
	// store (CAIRN_RECORD_VERIFICATION).
	RecordVerification bool
	Artifact           string

	// Checks run in the target after a restore (CAIRN_CHECKS);
	// DropTargetAfterChecks drops the target afterwards if the restore
	// created it (CAIRN_DROP_TARGET_AFTER_CHECKS).
	Checks                []contract.Check
	DropTargetAfterChecks bool
	// AllowOverwriteSource lets a restore replace the database the backup
	// was taken of (CAIRN_ALLOW_OVERWRITE_SOURCE).
	AllowOverwriteSource bool
	// CheckTimeout bounds each SQL check (CAIRN_CHECK_TIMEOUT).
	CheckTimeout time.Duration

	// TerminationLog is where the result line goes; TerminationLogSet
	// tells whether it was configured (or is the default).
	TerminationLog    string
	TerminationLogSet bool

	Compression string // zstd level: fastest, default or better
	// Parallelism (CAIRN_PARALLELISM, 1..64): backup of MySQL writes a
	// multi-part artifact when above 1, compressing and storing that many
	// parts at once; restore of a multi-part artifact loads that many
	// parts at once.
	Parallelism int
	// PartSize is a multi-part backup's data part size, bytes of SQL
	// before compression (CAIRN_PART_SIZE_MIB).
	PartSize int64
	Output   string // list: "json" or "table"
	Prune    bool   // backup: apply retention after a successful backup
	// Inventory is what backup records of the dumped tables: None,
	// RowCount or Checksum (CAIRN_INVENTORY).
	Inventory string
	LogLevel  string
	LogFormat string

	// Recipients are the age public keys backup (and a migration's export)
	// encrypts every artifact to (CAIRN_ENCRYPTION_RECIPIENTS); nil: no
	// encryption.
	Recipients *crypt.Recipients
	// Identities are the age private keys restore (and a migration's
	// import) decrypts with (CAIRN_ENCRYPTION_IDENTITY); nil: none given.
	Identities *crypt.Identities
	// identityText is the identity as given, for redaction.
	identityText string

	// Migrate is the configuration of `agent migrate <step>` (nil for the
	// other commands).
	Migrate *Migrate

	// PointInTime: backup takes a base for point-in-time recovery
	// (CAIRN_POINT_IN_TIME; MySQL/MariaDB).
	PointInTime bool
	// MaxSegmentAge and SpoolDir: `agent archive` (CAIRN_MAX_SEGMENT_AGE,
	// CAIRN_SPOOL_DIR).
	MaxSegmentAge time.Duration
	// MaxLag: `agent archive` is not ready while its newest archived
	// change is older than this (CAIRN_MAX_LAG).
	MaxLag   time.Duration
	SpoolDir string
	// HealthAddr: where `agent archive` answers its readiness
	// (contract.ArchiverReadyPath); the Deployment's probe uses the
	// default port, contract.ArchiverHealthPort.
	HealthAddr string
	// RecoveryTarget: restore to this second (CAIRN_RECOVERY_TARGET);
	// RecoverLatest: to the newest archived change ("latest").
	RecoveryTarget time.Time
	RecoverLatest  bool
	// ArchiveMaxRetainedWALBytes: `agent archive` and `agent
	// archive-status` (PostgreSQL) drop the archiver's replication slot
	// when it retains more WAL on the source than this (0: no limit;
	// CAIRN_ARCHIVE_MAX_RETAINED_WAL_BYTES).
	ArchiveMaxRetainedWALBytes int64
	// ArchiveReleaseSlot: `agent archive-status` (PostgreSQL) drops the
	// archiver's slot whatever it retains (CAIRN_ARCHIVE_RELEASE_SLOT);
	// it then needs no store (CAIRN_STORE may be unset).
	ArchiveReleaseSlot bool
}

// Env reads the environment and mounted files.
type Env struct {
	Lookup   func(key string) (string, bool)
	ReadFile func(name string) ([]byte, error)
}

func (e Env) get(k string) string {
	v, _ := e.Lookup(k)
	return v
}

// ErrHelp is returned when -h or --help was asked for; usage was printed.
var ErrHelp = flag.ErrHelp

// UsageError is a bad command line or configuration value.
type UsageError struct{ Msg string }

func (e *UsageError) Error() string { return e.Msg }

// Load parses the flags of command (args exclude the command) over the
// environment. Usage goes to usage when help is asked for.
func Load(command string, args []string, env Env, usage io.Writer) (*Config, error) {
	for _, a := range args {
		if a == "--" {
			break
		}
		if secretArg.MatchString(a) {
			name, _, _ := strings.Cut(a, "=")
			return nil, &UsageError{fmt.Sprintf("%s: credentials are never taken from arguments; use CAIRN_DB_PASSWORD or CAIRN_DB_PASSWORD_FILE for the database, AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY (or their _FILE variants) for S3", name)}
		}
	}

	c := &Config{Command: command}
	if command == "migrate" {
		if len(args) == 0 || strings.HasPrefix(args[0], "-") {
			if len(args) > 0 && (args[0] == "-h" || args[0] == "--help") {
				fmt.Fprintf(usage, "Usage: agent migrate <step> [flags]\n\nSteps: %s\n", strings.Join(MigrateSteps, ", "))
				return nil, ErrHelp
			}
			return nil, &UsageError{"migrate needs a step: " + strings.Join(MigrateSteps, ", ")}
		}
		c.Migrate = &Migrate{Step: args[0]}
		args = args[1:]
		if !slices.Contains(MigrateSteps, c.Migrate.Step) {
			return nil, &UsageError{fmt.Sprintf("unknown migrate step %q: want one of %s", c.Migrate.Step, strings.Join(MigrateSteps, ", "))}
		}
	}
	var errs []string
	envInt := func(k string, def int) int {
		v := env.get(k)
		if v == "" {
			return def
		}
		i, err := strconv.Atoi(v)
		if err != nil {
			errs = append(errs, fmt.Sprintf("%s=%q is not an integer", k, v))
			return def
		}
		return i
	}
	envBool := func(k string, def bool) bool {
		v := env.get(k)
		if v == "" {
			return def
		}
		b, err := strconv.ParseBool(v)
		if err != nil {
			errs = append(errs, fmt.Sprintf("%s=%q is not a boolean", k, v))
			return def
		}
		return b
	}
	envDuration := func(k string, def time.Duration) time.Duration {
		v := env.get(k)
		if v == "" {
			return def
		}
		d, err := time.ParseDuration(v)
		if err != nil {
			errs = append(errs, fmt.Sprintf("%s=%q is not a duration (e.g. 10m)", k, v))
			return def
		}
		return d
	}
	envStr := func(k, def string) string {
		if v := env.get(k); v != "" {
			return v
		}
		return def
	}

	fs := flag.NewFlagSet("agent "+command, flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	fs.StringVar(&c.Engine, "engine", env.get(contract.EnvEngine), "database engine: postgres or mysql (env CAIRN_ENGINE)")
	fs.StringVar(&c.DB.Host, "db-host", env.get(contract.EnvDBHost), "database host (env CAIRN_DB_HOST)")
	fs.IntVar(&c.DB.Port, "db-port", envInt(contract.EnvDBPort, 0), "database port; default 5432 or 3306 (env CAIRN_DB_PORT)")
	fs.StringVar(&c.DB.Database, "db-name", env.get(contract.EnvDBName), "database name (env CAIRN_DB_NAME)")
	fs.StringVar(&c.DB.User, "db-user", env.get(contract.EnvDBUser), "database user (env CAIRN_DB_USER)")
	passwordFile := fs.String("db-password-file", env.get(contract.EnvDBPasswordFile), "file holding the database password (env CAIRN_DB_PASSWORD_FILE; or env CAIRN_DB_PASSWORD)")
	fs.StringVar(&c.Store, "store", env.get(contract.EnvStore), "artifact store: pvc or s3 (env CAIRN_STORE)")
	fs.StringVar(&c.PVCPath, "pvc-path", env.get(contract.EnvPVCPath), "mount path of the backup volume (env CAIRN_PVC_PATH)")
	fs.StringVar(&c.S3.Endpoint, "s3-endpoint", env.get(contract.EnvS3Endpoint), "S3 endpoint, host:port or URL (env CAIRN_S3_ENDPOINT)")
	fs.StringVar(&c.S3.Bucket, "s3-bucket", env.get(contract.EnvS3Bucket), "S3 bucket (env CAIRN_S3_BUCKET)")
	fs.StringVar(&c.S3.Prefix, "s3-prefix", env.get(contract.EnvS3Prefix), "key prefix inside the bucket (env CAIRN_S3_PREFIX)")
	fs.BoolVar(&c.S3.Insecure, "s3-insecure", envBool(contract.EnvS3Insecure, false), "plain http to a host:port endpoint (env CAIRN_S3_INSECURE)")
	fs.StringVar(&c.S3.Region, "s3-region", env.get(contract.EnvS3Region), "S3 region (env CAIRN_S3_REGION)")
	fs.StringVar(&c.S3.LockMode, "s3-object-lock", env.get(contract.EnvS3ObjectLock), "S3 Object Lock mode artifacts are written with: GOVERNANCE or COMPLIANCE; empty for none (env "+contract.EnvS3ObjectLock+")")
	fs.IntVar(&c.LockDays, "s3-object-lock-days", envInt(contract.EnvS3ObjectLockDays, 0), "lock each artifact until its start + this many days; default the retention days (env "+contract.EnvS3ObjectLockDays+")")
	partMiB := fs.Int("s3-part-size-mib", envInt(contract.EnvS3PartSizeMiB, store.DefaultPartSize>>20), "multipart part size in MiB, 5..512: the upload's memory; 10,000 parts max (env CAIRN_S3_PART_SIZE_MIB)")
	job := fs.String("backupjob", env.get(contract.EnvBackupJob), "BackupJob namespace/name: the catalog key (env CAIRN_BACKUPJOB)")
	fs.IntVar(&c.RetentionDays, "retention-days", envInt(contract.EnvRetentionDays, 0), "prune artifacts older than this many days, keeping the newest (env CAIRN_RETENTION_DAYS)")
	retention := fs.String("retention", env.get(contract.EnvRetention), "calendar-tier retention as JSON, e.g. {\"keepDaily\":7,\"keepMonthly\":12,\"minVerified\":1}; instead of --retention-days (env "+contract.EnvRetention+")")
	timeZone := fs.String("time-zone", envStr(contract.EnvTimeZone, "UTC"), "IANA time zone the retention tiers count hours, days, weeks, months and years in (env "+contract.EnvTimeZone+")")
	fs.BoolVar(&c.PruneDryRun, "dry-run", envBool(contract.EnvPruneDryRun, false), "prune: report what the policy keeps and would delete, delete nothing (env "+contract.EnvPruneDryRun+")")
	fs.BoolVar(&c.RecordVerification, "record-verification", envBool(contract.EnvRecordVerification, false), "restore: when every check passed, record the verification in the store next to the artifact (env "+contract.EnvRecordVerification+")")
	fs.StringVar(&c.Artifact, "artifact", env.get(contract.EnvArtifact), "restore: artifact name or path; empty = newest in the catalog (env CAIRN_ARTIFACT)")
	checkList := fs.String("checks", env.get(contract.EnvChecks), "restore: checks to run in the restored database, a JSON list (env "+contract.EnvChecks+")")
	fs.BoolVar(&c.DropTargetAfterChecks, "drop-target-after-checks", envBool(contract.EnvDropTargetAfterChecks, false), "restore: drop the target after the checks, only if the restore created it (env "+contract.EnvDropTargetAfterChecks+")")
	fs.BoolVar(&c.AllowOverwriteSource, "allow-overwrite-source", envBool(contract.EnvAllowOverwriteSource, false), "restore: allow restoring into the database the backup was taken of (env "+contract.EnvAllowOverwriteSource+")")
	fs.DurationVar(&c.CheckTimeout, "check-timeout", envDuration(contract.EnvCheckTimeout, checks.DefaultTimeout), "restore: how long one SQL check may run, 1s..24h (env CAIRN_CHECK_TIMEOUT)")
	termLog := fs.String("termination-log", env.get(contract.EnvTerminationLog), "file for the result line; default "+DefaultTerminationLog+" (env CAIRN_TERMINATION_LOG)")
	fs.StringVar(&c.Compression, "compression", envStr(contract.EnvCompression, "fastest"), "backup: zstd level, fastest (the default), default (about zstd -3) or better (env CAIRN_COMPRESSION)")
	fs.IntVar(&c.Parallelism, "parallelism", envInt(contract.EnvParallelism, 1), "backup (MySQL): above 1, write a multi-part artifact, this many parts at once; restore: load this many parts of a multi-part artifact at once, 1..64 (env "+contract.EnvParallelism+")")
	partSizeMiB := fs.Int("part-size-mib", envInt(contract.EnvPartSizeMiB, 32), "backup: SQL (before compression) in one data part of a multi-part artifact, MiB, 1..1024 (env "+contract.EnvPartSizeMiB+")")
	fs.StringVar(&c.Output, "output", envStr(contract.EnvOutput, "json"), "list: json (one line per artifact) or table (env CAIRN_OUTPUT)")
	fs.BoolVar(&c.Prune, "prune", envBool(contract.EnvPruneAfterBackup, true), "backup: prune by retention after a successful backup when retention days are set (env CAIRN_PRUNE_AFTER_BACKUP)")
	fs.StringVar(&c.Inventory, "inventory", envStr(contract.EnvInventory, "RowCount"), "backup: record per table None, RowCount or Checksum (row counts and content checksums) in the manifest, read in the dump's snapshot (env CAIRN_INVENTORY)")
	fs.StringVar(&c.LogLevel, "log-level", envStr(contract.EnvLogLevel, "info"), "debug, info, warn or error (env CAIRN_LOG_LEVEL)")
	fs.StringVar(&c.LogFormat, "log-format", envStr(contract.EnvLogFormat, "text"), "text or json, on stderr (env CAIRN_LOG_FORMAT)")

	fs.BoolVar(&c.PointInTime, "point-in-time", envBool(contract.EnvPointInTime, false), "backup: a base for point-in-time recovery (MySQL/MariaDB: the dump records its binary log position; PostgreSQL: a physical base backup of the cluster) (env "+contract.EnvPointInTime+")")
	fs.DurationVar(&c.MaxSegmentAge, "max-segment-age", envDuration(contract.EnvMaxSegmentAge, time.Minute), "archive: close the binary log file or WAL segment being written at least this often, 1s..1h (env "+contract.EnvMaxSegmentAge+")")
	fs.BoolVar(&c.ArchiveReleaseSlot, "archive-release-slot", envBool(contract.EnvArchiveReleaseSlot, false), "archive-status (PostgreSQL): drop the archiver's replication slot whatever it retains (its archiver is gone for good) (env "+contract.EnvArchiveReleaseSlot+")")
	maxRetained := fs.String("archive-max-retained-wal-bytes", env.get(contract.EnvArchiveMaxRetainedWALBytes), "archive, archive-status (PostgreSQL): drop the archiver's replication slot when it retains more WAL than this; 0 or empty: no limit (env "+contract.EnvArchiveMaxRetainedWALBytes+")")
	fs.DurationVar(&c.MaxLag, "max-lag", envDuration(contract.EnvMaxLag, 5*time.Minute), "archive: report not ready while the newest archived change is older than this (env "+contract.EnvMaxLag+")")
	fs.StringVar(&c.HealthAddr, "health-addr", ":"+strconv.Itoa(contract.ArchiverHealthPort), "archive: the address of the readiness endpoint "+contract.ArchiverReadyPath)
	fs.StringVar(&c.SpoolDir, "spool-dir", envStr(contract.EnvSpoolDir, "/tmp/cairn-binlog"), "archive: local folder for the files being received (env "+contract.EnvSpoolDir+")")
	recoveryTarget := fs.String("recovery-target", env.get(contract.EnvRecoveryTarget), "restore: to this second (RFC 3339 with a zone) or latest, from the archived binary log (env "+contract.EnvRecoveryTarget+")")

	var mg migrateFlags
	if c.Migrate != nil {
		mg.register(fs, env, envInt, envBool, envStr)
	}

	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			fs.SetOutput(usage)
			fmt.Fprintf(usage, "Usage: agent %s [flags]\n\nFlags (each overrides its environment variable):\n", command)
			fs.PrintDefaults()
			return nil, ErrHelp
		}
		return nil, &UsageError{err.Error()}
	}
	if fs.NArg() > 0 {
		return nil, &UsageError{fmt.Sprintf("unexpected argument %q", fs.Arg(0))}
	}
	if len(errs) > 0 {
		return nil, &UsageError{strings.Join(errs, "; ")}
	}

	// Credentials.
	var err error
	if c.DB.Password, err = secret(env, contract.EnvDBPassword, *passwordFile, contract.EnvDBPasswordFile); err != nil {
		return nil, err
	}
	if c.S3.AccessKey, err = secret(env, contract.EnvS3AccessKeyID, env.get(contract.EnvS3AccessKeyIDFile), contract.EnvS3AccessKeyIDFile); err != nil {
		return nil, err
	}
	if c.S3.SecretKey, err = secret(env, contract.EnvS3SecretAccessKey, env.get(contract.EnvS3SecretAccessKeyFile), contract.EnvS3SecretAccessKeyFile); err != nil {
		return nil, err
	}
	c.S3.SessionToken = env.get(contract.EnvS3SessionToken)
	if err := c.loadEncryption(env); err != nil {
		return nil, err
	}

	if c.Migrate != nil {
		if c.Migrate.Target.Password, err = secret(env, contract.EnvTargetPassword, mg.targetPasswordFile, contract.EnvTargetPasswordFile); err != nil {
			return nil, err
		}
	}

	if *partMiB < 5 || *partMiB > 512 {
		return nil, &UsageError{fmt.Sprintf("s3 part size %d MiB: want 5..512", *partMiB)}
	}
	c.S3.PartSize = uint64(*partMiB) << 20

	if err := engine.CheckConn(c.DB); err != nil {
		return nil, &UsageError{err.Error()}
	}
	if err := checkPrefix(c.S3.Prefix); err != nil {
		return nil, &UsageError{err.Error()}
	}
	if c.Engine != "" && c.Engine != "postgres" && c.Engine != "mysql" {
		return nil, &UsageError{fmt.Sprintf("engine %q: want postgres or mysql", c.Engine)}
	}
	if c.Migrate != nil {
		if err := mg.finish(c, *job); err != nil {
			return nil, err
		}
		*job = c.Migrate.Migration.String()
		if c.Migrate.Migration.Name == "" {
			*job = "" // no store key: steps that need a store say so
		}
	}
	if c.Migrate != nil && c.Store == "" {
		// A migration step uses a store only for a store transfer.
	} else if c.releaseOnly() && c.Store == "" {
		// Releasing a PostgreSQL archiver's slot reads no archive.
	} else if c.Store != "pvc" && c.Store != "s3" {
		if c.Store == "" {
			return nil, &UsageError{"store is not set: CAIRN_STORE or --store must be pvc or s3"}
		}
		return nil, &UsageError{fmt.Sprintf("store %q: want pvc or s3", c.Store)}
	}
	if c.Migrate == nil || *job != "" {
		if *job == "" {
			return nil, &UsageError{"backup job is not set: CAIRN_BACKUPJOB or --backupjob must be namespace/name"}
		}
		if c.BackupJob, err = naming.ParseJob(*job); err != nil {
			return nil, &UsageError{err.Error()}
		}
		if c.Migrate != nil {
			// A migration's exports live in their own key space.
			c.BackupJob.Space = naming.MigrationSpace
		}
	}
	if c.RetentionDays < 0 {
		return nil, &UsageError{fmt.Sprintf("retention days %d: must not be negative", c.RetentionDays)}
	}
	if *retention != "" {
		if c.Retention, err = contract.ParseRetention(*retention); err != nil {
			return nil, &UsageError{err.Error()}
		}
		if c.RetentionDays > 0 {
			return nil, &UsageError{"set either retention days (" + contract.EnvRetentionDays + ") or calendar tiers (" + contract.EnvRetention + "), not both"}
		}
	}
	if err := c.checkLock(); err != nil {
		return nil, err
	}
	if c.TimeZone, err = time.LoadLocation(*timeZone); err != nil || *timeZone == "Local" {
		return nil, &UsageError{fmt.Sprintf("time zone %q: want an IANA name such as Europe/Berlin", *timeZone)}
	}
	switch c.Compression {
	case "fastest", "default", "better":
	default:
		return nil, &UsageError{fmt.Sprintf("compression %q: want fastest, default or better", c.Compression)}
	}
	if c.Parallelism < 1 || c.Parallelism > 64 {
		return nil, &UsageError{fmt.Sprintf("parallelism %d: want 1 to 64", c.Parallelism)}
	}
	if *partSizeMiB < 1 || *partSizeMiB > 1024 {
		return nil, &UsageError{fmt.Sprintf("part size %d MiB: want 1 to 1024", *partSizeMiB)}
	}
	c.PartSize = int64(*partSizeMiB) << 20
	if c.CheckTimeout < time.Second || c.CheckTimeout > 24*time.Hour {
		return nil, &UsageError{fmt.Sprintf("check timeout %s: want 1s to 24h", c.CheckTimeout)}
	}
	if c.Checks, err = checks.Parse(*checkList); err != nil {
		return nil, &UsageError{err.Error()}
	}
	switch c.Inventory {
	case "None", "RowCount", "Checksum":
	default:
		return nil, &UsageError{fmt.Sprintf("inventory %q: want None, RowCount or Checksum", c.Inventory)}
	}
	if c.Output != "json" && c.Output != "table" {
		return nil, &UsageError{fmt.Sprintf("output %q: want json or table", c.Output)}
	}
	if v := strings.TrimSpace(*maxRetained); v != "" {
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil || n < 0 {
			return nil, &UsageError{fmt.Sprintf("archive max retained WAL bytes %q: want a non-negative number of bytes", v)}
		}
		c.ArchiveMaxRetainedWALBytes = n
	}
	if err := c.pointInTime(*recoveryTarget); err != nil {
		return nil, err
	}
	c.TerminationLog, c.TerminationLogSet = *termLog, *termLog != ""
	if c.TerminationLog == "" {
		c.TerminationLog = DefaultTerminationLog
	}
	return c, nil
}

// releaseOnly: `agent archive-status` asked to release a PostgreSQL
// archiver's slot, which needs the source and no store.
func (c *Config) releaseOnly() bool {
	return c.Command == "archive-status" && c.ArchiveReleaseSlot && c.Engine == "postgres"
}

// pointInTime checks the point-in-time settings of the command.
func (c *Config) pointInTime(target string) error {
	if c.MaxSegmentAge < time.Second || c.MaxSegmentAge > time.Hour {
		return &UsageError{fmt.Sprintf("max segment age %s: want 1s to 1h", c.MaxSegmentAge)}
	}
	if c.MaxLag < c.MaxSegmentAge {
		return &UsageError{fmt.Sprintf("max lag %s: want at least the max segment age, %s", c.MaxLag, c.MaxSegmentAge)}
	}
	knownEngine := func(what string) error {
		if c.Engine != "mysql" && c.Engine != "postgres" {
			return &UsageError{fmt.Sprintf("%s needs the engine set, mysql (binary log) or postgres (write-ahead log); engine is %q", what, c.Engine)}
		}
		return nil
	}
	if c.Command == "archive" || c.Command == "archive-status" {
		if err := knownEngine(c.Command); err != nil {
			return err
		}
	}
	if c.PointInTime && c.Command == "backup" {
		if err := knownEngine("point-in-time backup"); err != nil {
			return err
		}
	}
	switch target {
	case "":
		return nil
	case "latest":
		c.RecoverLatest = true
	default:
		t, err := time.Parse(time.RFC3339, target)
		if err != nil {
			return &UsageError{fmt.Sprintf("recovery target %q: want RFC 3339 with a zone (2026-12-05T10:04:00Z) or latest", target)}
		}
		c.RecoveryTarget = t.UTC()
	}
	if c.Command != "restore" {
		return &UsageError{"a recovery target is for restore only"}
	}
	return nil
}
