package contract

// Commands of the agent: the first argument of its container. `migrate`
// takes a step (Step…) as its second argument.
const (
	CommandBackup  = "backup"
	CommandRestore = "restore"
	CommandList    = "list"
	CommandPrune   = "prune"
	CommandDelete  = "delete"
	CommandMigrate = "migrate"
	CommandArchive = "archive"
	// CommandArchiveStatus reports (and watches) a point-in-time archive.
	CommandArchiveStatus = "archive-status"
)

// Commands lists every command, in the order `agent help` shows them.
var Commands = []string{CommandBackup, CommandRestore, CommandList, CommandPrune, CommandDelete, CommandMigrate, CommandArchive, CommandArchiveStatus}

// Stores: the values of EnvStore.
const (
	StorePVC = "pvc"
	StoreS3  = "s3"
)

// The environment every command reads: the database, the store, the
// catalog key, logging. Each one has a flag of the agent that overrides it
// (`agent <command> -h`).
const (
	// EnvEngine is postgres or mysql (EnginePostgres, EngineMySQL).
	EnvEngine = "CAIRN_ENGINE"
	// The database: host, port (default 5432 or 3306), name, user and
	// password (or a file holding it: a mounted Secret key).
	EnvDBHost         = "CAIRN_DB_HOST"
	EnvDBPort         = "CAIRN_DB_PORT"
	EnvDBName         = "CAIRN_DB_NAME"
	EnvDBUser         = "CAIRN_DB_USER"
	EnvDBPassword     = "CAIRN_DB_PASSWORD"
	EnvDBPasswordFile = "CAIRN_DB_PASSWORD_FILE"
	// EnvStore is StorePVC or StoreS3.
	EnvStore = "CAIRN_STORE"
	// EnvPVCPath is where the store's volume is mounted.
	EnvPVCPath = "CAIRN_PVC_PATH"
	// The S3 store: endpoint (host:port or URL), bucket, key prefix, region,
	// plain http, multipart part size in MiB (the upload's memory).
	EnvS3Endpoint    = "CAIRN_S3_ENDPOINT"
	EnvS3Bucket      = "CAIRN_S3_BUCKET"
	EnvS3Prefix      = "CAIRN_S3_PREFIX"
	EnvS3Region      = "CAIRN_S3_REGION"
	EnvS3Insecure    = "CAIRN_S3_INSECURE"
	EnvS3PartSizeMiB = "CAIRN_S3_PART_SIZE_MIB"
	// EnvS3ObjectLock is GOVERNANCE or COMPLIANCE: backup writes each
	// artifact and its manifest with S3 Object Lock retention in that mode
	// until the artifact's start + EnvS3ObjectLockDays (default
	// EnvRetentionDays), and prune never deletes an artifact that is still
	// locked (it is kept, reason KeepLocked). With calendar tiers
	// (EnvRetention), prune extends the lock of an artifact a tier keeps
	// longer (e.g. a month's newest, kept 12 months) to the date the tier
	// keeps it at least; it never shortens one. The bucket must have Object
	// Lock (and so versioning) enabled.
	EnvS3ObjectLock     = "CAIRN_S3_OBJECT_LOCK"
	EnvS3ObjectLockDays = "CAIRN_S3_OBJECT_LOCK_DAYS"
	// The S3 credentials, under the names every S3 tool reads (or files
	// holding them), and an optional session token.
	EnvS3AccessKeyID         = "AWS_ACCESS_KEY_ID"
	EnvS3AccessKeyIDFile     = "AWS_ACCESS_KEY_ID_FILE"
	EnvS3SecretAccessKey     = "AWS_SECRET_ACCESS_KEY"
	EnvS3SecretAccessKeyFile = "AWS_SECRET_ACCESS_KEY_FILE"
	EnvS3SessionToken        = "AWS_SESSION_TOKEN"
	// EnvBackupJob is the catalog key: the BackupJob's "namespace/name"
	// (a MigrationJob's for a store transfer).
	EnvBackupJob = "CAIRN_BACKUPJOB"
	// EnvRetentionDays: backup prunes artifacts older than this many days
	// after a success (keeping the newest), prune does; 0 or unset = none.
	EnvRetentionDays = "CAIRN_RETENTION_DAYS"
	// EnvPruneAfterBackup "false": backup does not prune.
	EnvPruneAfterBackup = "CAIRN_PRUNE_AFTER_BACKUP"
	// EnvRetention is a calendar-tier policy (JSON of Retention), the
	// other form of retention: set it or EnvRetentionDays, not both.
	EnvRetention = "CAIRN_RETENTION"
	// EnvTimeZone is the IANA zone the tiers' hours, days, weeks, months
	// and years are counted in (the BackupJob's spec.timeZone; default UTC).
	EnvTimeZone = "CAIRN_TIME_ZONE"
	// EnvPruneDryRun "true": prune (and backup's prune afterwards) reports
	// what it keeps and would delete, and deletes nothing.
	EnvPruneDryRun = "CAIRN_PRUNE_DRY_RUN"
	// EnvRecordVerification "true": a restore whose checks all passed
	// records that in the store next to the artifact (a ProtectionPlan's
	// verification), for Retention.MinVerified.
	EnvRecordVerification = "CAIRN_RECORD_VERIFICATION"
	// EnvArtifact is the artifact restore (and a store transfer's import,
	// verify and cutover) reads: a name or a path; empty = the newest in the
	// catalog.
	EnvArtifact = "CAIRN_ARTIFACT"
	// EnvCompression is backup's zstd level: fastest, default or better.
	EnvCompression = "CAIRN_COMPRESSION"
	// EnvParallelism (1..64, default 1): backup of MySQL writes a
	// multi-part artifact when above 1, that many parts compressed and
	// stored at once; restore of a multi-part artifact loads that many
	// parts over as many connections at once (RestoreJob/BackupJob
	// spec.parallelism).
	EnvParallelism = "CAIRN_PARALLELISM"
	// EnvPartSizeMiB (1..1024, default 32) is how much SQL, before
	// compression, one data part of a multi-part artifact holds at most
	// (give or take one statement): one transaction on restore.
	EnvPartSizeMiB = "CAIRN_PART_SIZE_MIB"
	// EnvInventory is what backup records per table: None, RowCount or
	// Checksum.
	EnvInventory = "CAIRN_INVENTORY"
	// EnvOutput is list's output: json or table.
	EnvOutput = "CAIRN_OUTPUT"
	// EnvCheckTimeout is how long one restore check may run (a duration).
	EnvCheckTimeout = "CAIRN_CHECK_TIMEOUT"
	// EnvTerminationLog is the file the result line is written to (default
	// the kubelet's /dev/termination-log).
	EnvTerminationLog = "CAIRN_TERMINATION_LOG"
	// EnvLogLevel (debug, info, warn, error) and EnvLogFormat (text, json)
	// of the agent's log on stderr.
	EnvLogLevel  = "CAIRN_LOG_LEVEL"
	EnvLogFormat = "CAIRN_LOG_FORMAT"
)

// The restore's checks and guards, between the restore operator and
// `agent restore`.
const (
	// EnvChecks holds the checks as a JSON list of Check (the RestoreJob's
	// spec.checks), run in the target after a successful restore.
	EnvChecks = "CAIRN_CHECKS"
	// EnvDropTargetAfterChecks "true": drop the target after the checks ran,
	// only if the restore created it.
	EnvDropTargetAfterChecks = "CAIRN_DROP_TARGET_AFTER_CHECKS"
	// EnvAllowOverwriteSource "true": the restore may replace the very
	// database the backup was taken of (RestoreJob
	// spec.allowOverwriteSource). Without it the agent compares the
	// target's server identity with the one the backup recorded and
	// refuses a match before it writes anything.
	EnvAllowOverwriteSource = "CAIRN_ALLOW_OVERWRITE_SOURCE"
)

// Client-side encryption (age, filippo.io/age), between the operators and
// `agent backup` / `agent restore` (and a migration's export and import).
const (
	// EnvEncryptionRecipients holds age X25519 public keys (age1…), one
	// per line ("#" comments allowed): backup encrypts every artifact to
	// all of them, archive every segment of the archived log. Rendered from a Secret or ConfigMap key (a BackupJob's
	// spec.encryption.recipients). Public keys only: a private key here is
	// refused.
	EnvEncryptionRecipients = "CAIRN_ENCRYPTION_RECIPIENTS"
	// EnvEncryptionRecipientsFile names a file holding the recipients
	// instead (set one of the two).
	EnvEncryptionRecipientsFile = "CAIRN_ENCRYPTION_RECIPIENTS_FILE"
	// EnvEncryptionIdentity holds age X25519 private keys
	// (AGE-SECRET-KEY-1…), one per line: restore decrypts an encrypted
	// artifact with them. Rendered from a Secret key only (a RestoreJob's
	// spec.encryption.identitySecretRef). An encrypted artifact restored
	// without a matching identity fails before the target is touched, with
	// CodeEncryptionIdentityMissing or CodeEncryptionIdentityMismatch.
	EnvEncryptionIdentity = "CAIRN_ENCRYPTION_IDENTITY"
	// EnvEncryptionIdentityFile names a file holding the identity instead
	// (set one of the two).
	EnvEncryptionIdentityFile = "CAIRN_ENCRYPTION_IDENTITY_FILE"
)

// Environment variables of `agent migrate` (besides the backup's).
const (
	// EnvMigration is the MigrationJob's "<namespace>/<name>"; it names the
	// store artifacts of a store transfer and the replication objects.
	EnvMigration = "CAIRN_MIGRATION"
	// EnvMigrationUID is the MigrationJob's UID; replication objects
	// (publication, subscription, slot) carry a hash of it in their names.
	EnvMigrationUID = "CAIRN_MIGRATION_UID"
	// EnvMode is Full, SchemaOnly or Continuous.
	EnvMode = "CAIRN_MIGRATE_MODE"
	// EnvInclude and EnvExclude are comma-separated "schema.table" patterns
	// (`*` any run of characters, `?` one character; a pattern without a dot
	// matches a schema/database name, i.e. all its tables). Empty include =
	// everything; exclude wins over include.
	EnvInclude = "CAIRN_MIGRATE_INCLUDE"
	EnvExclude = "CAIRN_MIGRATE_EXCLUDE"
	// EnvParallel is the number of tables copied (and verified) at once.
	EnvParallel = "CAIRN_MIGRATE_PARALLEL"
	// EnvAllowNonEmptyTarget "true" lets precheck pass when the target holds
	// included objects.
	EnvAllowNonEmptyTarget = "CAIRN_MIGRATE_ALLOW_NON_EMPTY_TARGET"
	// EnvVerify is None, RowCount or Checksum (row counts and a content
	// checksum per table).
	EnvVerify = "CAIRN_MIGRATE_VERIFY"
	// EnvCutoverSourceReadOnly "true": cutover makes the source database
	// read-only; precheck checks the privileges that needs; abort makes
	// the source writable again.
	EnvCutoverSourceReadOnly = "CAIRN_CUTOVER_SOURCE_READ_ONLY"
	// EnvCutoverWritersStopped "true": the user declared that no
	// application writes to the source any more (spec.cutover.writersStopped),
	// so a Full cutover (direct transfer) may copy again the tables that
	// changed since verification.
	EnvCutoverWritersStopped = "CAIRN_CUTOVER_WRITERS_STOPPED"
	// EnvMaxRetainedWALBytes: a step that finds the migration's slot
	// retaining more WAL on the source fails with the code
	// CodeRetainedWALOverLimit (replication-status, the waits of verify and
	// replication-stop).
	EnvMaxRetainedWALBytes = "CAIRN_REPLICATION_MAX_RETAINED_WAL_BYTES"

	EnvTargetHost     = "CAIRN_TARGET_DB_HOST"
	EnvTargetPort     = "CAIRN_TARGET_DB_PORT"
	EnvTargetName     = "CAIRN_TARGET_DB_NAME"
	EnvTargetUser     = "CAIRN_TARGET_DB_USER"
	EnvTargetPassword = "CAIRN_TARGET_DB_PASSWORD"
	// EnvPointInTime "true": backup takes a base for point-in-time
	// recovery (docs/pitr.md): MySQL/MariaDB, a dump that records where its
	// snapshot stands in the binary log; PostgreSQL, a physical base backup
	// of the cluster (pg_basebackup, artifact "….pgbase.tar.zst", its WAL
	// start in the manifest's walBase).
	EnvPointInTime = "CAIRN_POINT_IN_TIME"
	// EnvMaxSegmentAge: `agent archive` closes the binary log file (WAL
	// segment) being written at least this often (a Go duration; default
	// 1m).
	EnvMaxSegmentAge = "CAIRN_MAX_SEGMENT_AGE"
	// EnvSpoolDir: where `agent archive` receives the files being written
	// (default /tmp/cairn-binlog).
	EnvSpoolDir = "CAIRN_SPOOL_DIR"
	// EnvArchiveMaxRetainedWALBytes (PostgreSQL): `agent archive` and
	// `agent archive-status` drop the archiver's physical replication slot
	// when it retains more WAL on the source than this many bytes (the
	// archive then shows a gap; the source is never held back). Empty or
	// 0: no limit.
	EnvArchiveMaxRetainedWALBytes = "CAIRN_ARCHIVE_MAX_RETAINED_WAL_BYTES"
	// EnvArchiveReleaseSlot (PostgreSQL): `agent archive-status` drops the
	// archiver's replication slot whatever it retains ("true"): point-in-time
	// was turned off or its BackupJob deleted, and its archiver is gone, so
	// nothing will advance the slot again.
	EnvArchiveReleaseSlot = "CAIRN_ARCHIVE_RELEASE_SLOT"
	// EnvRecoveryTarget: restore to this second (RFC 3339 with a zone), or
	// "latest": the newest base before it, then the archived binary log.
	EnvRecoveryTarget = "CAIRN_RECOVERY_TARGET"
	// EnvMaxLag: `agent archive` reports itself not ready (its health
	// endpoint, ArchiverHealthPort ArchiverReadyPath) while the newest
	// archived change is older than this (a Go duration; default 5m).
	EnvMaxLag = "CAIRN_MAX_LAG"
	// EnvTargetPasswordFile names a file holding the target password (a
	// mounted Secret key; one trailing newline dropped). Set it or
	// EnvTargetPassword, not both.
	EnvTargetPasswordFile = "CAIRN_TARGET_DB_PASSWORD_FILE"
)

// Vars are the variables every command parses, MigrateVars those only
// `agent migrate` parses besides. The agent parses each one and no other,
// and an operator renders no other: both sides are tested against these
// lists (agent/internal/config; libs/agentjob and the operators' Job tests).
var (
	Vars = []string{
		EnvEngine, EnvDBHost, EnvDBPort, EnvDBName, EnvDBUser, EnvDBPassword, EnvDBPasswordFile,
		EnvStore, EnvPVCPath, EnvS3Endpoint, EnvS3Bucket, EnvS3Prefix, EnvS3Region, EnvS3Insecure, EnvS3PartSizeMiB, EnvS3ObjectLock, EnvS3ObjectLockDays,
		EnvS3AccessKeyID, EnvS3AccessKeyIDFile, EnvS3SecretAccessKey, EnvS3SecretAccessKeyFile, EnvS3SessionToken,
		EnvBackupJob, EnvRetentionDays, EnvPruneAfterBackup, EnvRetention, EnvTimeZone, EnvPruneDryRun, EnvRecordVerification, EnvArtifact, EnvCompression, EnvParallelism, EnvPartSizeMiB, EnvInventory, EnvOutput,
		EnvCheckTimeout, EnvTerminationLog, EnvLogLevel, EnvLogFormat,
		EnvChecks, EnvDropTargetAfterChecks, EnvAllowOverwriteSource,
		EnvEncryptionRecipients, EnvEncryptionRecipientsFile, EnvEncryptionIdentity, EnvEncryptionIdentityFile,
		EnvPointInTime, EnvMaxSegmentAge, EnvSpoolDir, EnvRecoveryTarget, EnvMaxLag, EnvArchiveMaxRetainedWALBytes, EnvArchiveReleaseSlot,
	}
	MigrateVars = []string{
		EnvMigration, EnvMigrationUID, EnvMode, EnvInclude, EnvExclude, EnvParallel, EnvAllowNonEmptyTarget, EnvVerify,
		EnvCutoverSourceReadOnly, EnvCutoverWritersStopped, EnvMaxRetainedWALBytes,
		EnvTargetHost, EnvTargetPort, EnvTargetName, EnvTargetUser, EnvTargetPassword, EnvTargetPasswordFile,
	}
)

// The archiver's health endpoint (`agent archive`): HTTP on this port of the
// pod, ArchiverReadyPath answers 200 while the archiver streams, its newest
// archived change is within EnvMaxLag (or nothing is waiting to be archived)
// and its archive has no gap; 503 with the reason otherwise. The archiver
// Deployment's readiness probe.
const (
	ArchiverHealthPort = 8080
	ArchiverReadyPath  = "/readyz"
)
