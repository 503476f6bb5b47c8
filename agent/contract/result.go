package contract

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"
	"unicode/utf8"
)

// MaxMessageBytes is the kubelet's limit for a container termination message.
const MaxMessageBytes = 4096

// Exit codes of the agent process. Operators match them in a Job's
// podFailurePolicy (cairn.dev/libs/agentjob): ExitUsage and ExitCorrupted
// mean that running the same Pod again would fail the same way, so the Job
// fails at once instead of using up its retries. Any other non-zero code
// (ExitFailure, or a signal's 128+n) may be transient and is retried.
const (
	// ExitOK: the command succeeded.
	ExitOK = 0
	// ExitFailure: the command failed (database or store unreachable, a
	// dump tool failed, ...); a retry may succeed.
	ExitFailure = 1
	// ExitUsage: the command line or the configuration (CAIRN_* variables,
	// flags) is invalid; the agent did nothing.
	ExitUsage = 2
	// ExitCorrupted: the stored artifact failed its integrity check (size,
	// checksum, or a compressed stream that cannot be decoded).
	ExitCorrupted = 3
	// ExitUnsupported: the database server's engine or version is one no
	// tool of this agent image can serve (e.g. a PostgreSQL 18 server and
	// PostgreSQL 15 tools); the failure's code is CodeUnsupportedServer and
	// its reason names the server's version and the range the image
	// supports. Running the same image again cannot succeed.
	ExitUnsupported = 4
)

// Engines.
const (
	EnginePostgres = "postgres"
	EngineMySQL    = "mysql"
)

// Result describes one artifact written by `agent backup` or read by
// `agent restore`.
type Result struct {
	// Artifact is the artifact's path in the store: relative to the PVC mount
	// path, or the object key (including the configured prefix) in the bucket.
	Artifact string `json:"artifact"`
	// Size is the stored (compressed) size in bytes.
	Size int64 `json:"size"`
	// Checksum is "sha256:" followed by the lowercase hex SHA-256 of the
	// stored bytes.
	Checksum string `json:"checksum"`
	// Start and End are UTC instants (RFC 3339) of the command's data transfer.
	Start time.Time `json:"start"`
	End   time.Time `json:"end"`
	// DurationSeconds is End-Start in seconds.
	DurationSeconds float64 `json:"durationSeconds"`
	// Engine is "postgres" or "mysql".
	Engine string `json:"engine"`
	// Server is the database server the command talked to, as it
	// reported itself at the start (backup: the source; restore: the
	// target); absent in older messages and for list.
	Server *ServerInfo `json:"server,omitempty"`
	// EncryptedTo are the fingerprints ("age-fp:<16 hex>", the first 16 hex
	// digits of the SHA-256 of the age public key) of the recipients the
	// artifact is encrypted to; empty when it is not encrypted.
	EncryptedTo []string `json:"encryptedTo,omitempty"`
	// Parts is the number of parts of a multi-part artifact (then Size and
	// Checksum are of its parts index) and PartsSize their stored bytes;
	// absent for a single-file artifact.
	Parts     int   `json:"parts,omitempty"`
	PartsSize int64 `json:"partsSize,omitempty"`

	// The fields below are reported by a restore asked to run checks
	// (EnvChecks) or to drop its target (EnvDropTargetAfterChecks); absent
	// otherwise, so older messages parse unchanged.

	// Checks are the results of the checks, in the order they were given.
	// Every check given has a result: a check that could not run failed.
	Checks []CheckResult `json:"checks,omitempty"`
	// TargetCreated: the target database did not exist and this restore
	// (or an earlier attempt of a restore from the same catalog key, see
	// the engines) created it.
	TargetCreated bool `json:"targetCreated,omitempty"`
	// TargetDropped: the target database was dropped after the checks ran
	// (only ever when TargetCreated).
	TargetDropped bool `json:"targetDropped,omitempty"`
	// PointInTime is the archive's recoverable window as a backup with
	// EnvPointInTime read it after its prune; absent otherwise.
	PointInTime *PointInTimeWindow `json:"pointInTime,omitempty"`
	// RecoveryPoint is the second a point-in-time restore reached (the
	// target, or the newest archived change for "latest").
	RecoveryPoint time.Time `json:"recoveryPoint,omitzero"`
	// DropError says why a drop that was asked for did not happen (e.g.
	// "the target existed before the restore; it is never dropped").
	DropError string `json:"dropError,omitempty"`
	// Verified: the restore recorded in the store that the artifact
	// restored and every check passed (EnvRecordVerification).
	Verified bool `json:"verified,omitempty"`

	// Retention is what the backup's prune afterwards kept and why, and
	// what it deleted (or, dry run, would delete); absent when it did not
	// prune.
	Retention *RetentionReport `json:"retention,omitempty"`
}

// The words a failed restore's reason ends with when it created a scratch
// database (EnvDropTargetAfterChecks) and was stopped: dropped, or not
// (then why). The failure's code says the same for the operator
// (CodeScratchDropped, CodeScratchNotDropped).
const (
	ScratchDropped    = "the scratch database it created was dropped"
	ScratchNotDropped = "the scratch database it created was NOT dropped"
)

// Check is one check to run in a restored database: a SQL query returning
// one row with one column and an expected value (Equals, AtLeast, AtMost;
// all that are set must hold), or RowCountsMatchBackup. The JSON is the
// RestoreJob API's spec.checks[].
type Check struct {
	Name                 string  `json:"name"`
	SQL                  string  `json:"sql,omitempty"`
	Equals               *string `json:"equals,omitempty"`
	AtLeast              *int64  `json:"atLeast,omitempty"`
	AtMost               *int64  `json:"atMost,omitempty"`
	RowCountsMatchBackup bool    `json:"rowCountsMatchBackup,omitempty"`
}

// CheckResult is the outcome of one check. The JSON is the RestoreJob API's
// status.checks[].
type CheckResult struct {
	Name   string `json:"name"`
	Passed bool   `json:"passed"`
	// Value is what the query returned, or a summary of the row counts.
	Value string `json:"value,omitempty"`
	// Message says why the check failed.
	Message string `json:"message,omitempty"`
}

// MarshalResult returns r as one JSON line of at most MaxMessageBytes:
// check values and messages are shortened, then left out, until it fits.
func MarshalResult(r Result) ([]byte, error) {
	if r.Retention != nil {
		rr := *r.Retention
		rr.Kept, rr.Pruned = append([]KeptArtifact(nil), rr.Kept...), append([]string(nil), rr.Pruned...)
		r.Retention = &rr
	}
	b, err := Marshal(r)
	for err == nil && len(b) > MaxMessageBytes && r.Retention.shrink() {
		b, err = Marshal(r)
	}
	if err != nil || len(b) <= MaxMessageBytes || len(r.Checks) == 0 {
		return b, err
	}
	r.Checks = append([]CheckResult(nil), r.Checks...)
	for _, limit := range []int{256, 96, 32, 0} {
		for i := range r.Checks {
			r.Checks[i].Value = cut(r.Checks[i].Value, limit)
			r.Checks[i].Message = cut(r.Checks[i].Message, limit)
		}
		r.DropError = cut(r.DropError, limit+64)
		if b, err = Marshal(r); err != nil || len(b) <= MaxMessageBytes {
			return b, err
		}
	}
	return nil, fmt.Errorf("restore result with %d checks does not fit %d bytes", len(r.Checks), MaxMessageBytes)
}

// cut shortens s to at most n bytes (whole runes), marking a cut with "…".
func cut(s string, n int) string {
	if len(s) <= n {
		return s
	}
	if n == 0 {
		return ""
	}
	i := max(n-len("…"), 0)
	for i > 0 && !utf8.RuneStart(s[i]) {
		i--
	}
	return s[:i] + "…"
}

// Failure is reported instead of a Result when a command fails. It is also
// the error type Parse returns for a failure message.
type Failure struct {
	// Error is a one-line reason. It never contains a credential.
	Error string `json:"error"`
	// Code says what kind of failure it is when an operator acts on the
	// kind (Code…); empty otherwise. Operators decide on the code, never on
	// the reason's words.
	Code string `json:"code,omitempty"`
	// Server is the database server the command found before it failed,
	// when it reports it (CodeUnsupportedServer: the server no tool of the
	// image can serve); absent otherwise.
	Server *ServerInfo `json:"server,omitempty"`
}

// Failure codes.
const (
	// CodeRetainedWALOverLimit: a replication slot of the migration keeps
	// more WAL on the source than EnvMaxRetainedWALBytes allows. The
	// migration operator drops the replication and fails the MigrationJob.
	CodeRetainedWALOverLimit = "RetainedWALOverLimit"
	// CodeScratchDropped and CodeScratchNotDropped: a verification restore
	// (EnvDropTargetAfterChecks) was stopped before it finished, and the
	// scratch database it created was dropped, or was not (the reason says
	// why). The restore operator reports it.
	CodeScratchDropped    = "ScratchDropped"
	CodeScratchNotDropped = "ScratchNotDropped"
	// CodeEncryptionIdentityMissing: the artifact is encrypted and the
	// restore was given no identity (EnvEncryptionIdentity). Nothing was
	// written to the target; the reason names the recipients it needs.
	CodeEncryptionIdentityMissing = "EncryptionIdentityMissing"
	// CodeEncryptionIdentityMismatch: the artifact is encrypted, and no
	// identity given is one of its recipients (or the key did not open the
	// artifact). Nothing was written to the target; the reason names the
	// recipients the artifact needs and the identity's own.
	CodeEncryptionIdentityMismatch = "EncryptionIdentityMismatch"
	// CodeRestoreIncomplete: a parallel MySQL restore of a multi-part
	// artifact failed after it began writing: the target holds the schema
	// and the data parts the reason counts, each part whole (one
	// transaction per part), and no trigger, view or routine. Restore
	// again into an empty database. (A PostgreSQL restore commits nothing
	// on failure and never carries it.)
	CodeRestoreIncomplete = "RestoreIncomplete"
	// CodeOutsideWindow: a point-in-time restore (EnvRecoveryTarget) asked
	// for a time the archive cannot recover (before the oldest base, after
	// the newest archived change); CodeArchiveGap: the log from the base to
	// that time has a gap. Either way nothing was written to the target;
	// the reason names the window or the missing segment.
	CodeOutsideWindow = "OutsideRecoverableWindow"
	CodeArchiveGap    = "ArchiveGap"
)

// CodeUnsupportedServer: no tool of the agent image can serve the
// database server's version (the agent exits with ExitUnsupported);
// nothing was written. The reason names the server's version and the
// range the image supports.
const CodeUnsupportedServer = "UnsupportedServerVersion"

// ServerInfo is a database server as it reported itself.
type ServerInfo struct {
	// Engine is "postgres", "mysql" (Oracle MySQL) or "mariadb".
	Engine string `json:"engine"`
	// Version is the server's version, e.g. "18.1", "9.7.4", "11.8.3".
	Version string `json:"version"`
}

// CodedError is an error the agent reports with a failure code.
type CodedError struct {
	Code string
	Err  error
}

func (e *CodedError) Error() string { return e.Err.Error() }
func (e *CodedError) Unwrap() error { return e.Err }

// FailureCode is the code of err's CodedError, or "".
func FailureCode(err error) string {
	var ce *CodedError
	if errors.As(err, &ce) {
		return ce.Code
	}
	return ""
}

// Summary is reported by the commands that do not move one artifact:
// list, prune and delete.
type Summary struct {
	Command   string `json:"command"`
	BackupJob string `json:"backupJob"`
	// Count is the number of catalog entries after the command.
	Count int `json:"count"`
	// Deleted is the number of artifacts (and leftovers of interrupted
	// backups) removed by prune or delete.
	Deleted int `json:"deleted,omitempty"`
	// Newest is the newest successful artifact's path, if any.
	Newest string `json:"newest,omitempty"`
	// Retention is what prune kept and why, and what it deleted (or, dry
	// run, would delete).
	Retention *RetentionReport `json:"retention,omitempty"`
}

// FailedError is returned by Parse, ParseMigration and ParseCatalog for a
// Failure message: its reason and code.
type FailedError struct {
	Reason, Code string
	// Server is the failure's server, when it reported one.
	Server *ServerInfo
}

func (e *FailedError) Error() string { return "agent failed: " + e.Reason }

// Marshal returns v as one JSON line (with the trailing newline).
func Marshal(v any) ([]byte, error) {
	b, err := json.Marshal(v)
	if err != nil {
		return nil, err
	}
	return append(b, '\n'), nil
}

// FailureLine returns a Failure (reason, and code: a Code… or "") as one
// JSON line that fits in MaxMessageBytes, shortening the reason if needed.
// Newlines in the reason are replaced by spaces so the message stays one
// line.
func FailureLine(reason, code string) []byte { return FailureLineServer(reason, code, nil) }

// FailureLineServer is FailureLine with the server the command found
// (nil: none).
func FailureLineServer(reason, code string, server *ServerInfo) []byte {
	reason = strings.Join(strings.Fields(reason), " ")
	b, _ := Marshal(Failure{Error: reason, Code: code, Server: server})
	for len(b) > MaxMessageBytes {
		// JSON escaping makes a rune at least one byte, so cutting the excess
		// (plus room for the ellipsis) in runes always shrinks the line.
		r := []rune(reason)
		cut := min(len(b)-MaxMessageBytes+4, len(r))
		reason = string(r[:len(r)-cut]) + "…"
		b, _ = Marshal(Failure{Error: reason, Code: code, Server: server})
	}
	return b
}

// Parse decodes a termination message written by the agent's backup or
// restore command. A failure message yields a *FailedError.
func Parse(message string) (*Result, error) {
	message = strings.TrimSpace(message)
	if message == "" {
		return nil, errors.New("empty termination message")
	}
	var probe map[string]json.RawMessage
	if err := json.Unmarshal([]byte(message), &probe); err != nil {
		return nil, fmt.Errorf("termination message is not agent JSON: %q", truncate(message, 200))
	}
	if _, ok := probe["error"]; ok {
		return nil, parseFailure(message)
	}
	var r Result
	if err := json.Unmarshal([]byte(message), &r); err != nil {
		return nil, fmt.Errorf("malformed result message: %w", err)
	}
	if r.Artifact == "" || !strings.HasPrefix(r.Checksum, "sha256:") {
		return nil, fmt.Errorf("result message lacks artifact or sha256 checksum: %q", truncate(message, 200))
	}
	return &r, nil
}

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "…"
}

// parseFailure decodes a Failure message into a *FailedError (or the
// error of a malformed one).
func parseFailure(message string) error {
	var f Failure
	if err := json.Unmarshal([]byte(message), &f); err != nil {
		return fmt.Errorf("malformed failure message: %w", err)
	}
	return &FailedError{Reason: f.Error, Code: f.Code, Server: f.Server}
}

// PointInTimeWindow is what an archive can recover (docs/pitr.md).
type PointInTimeWindow struct {
	// Earliest is the end of the oldest kept base: the earliest second a
	// restore can reach. Zero when no base is kept.
	Earliest time.Time `json:"earliest,omitzero"`
	// Latest is the newest archived change.
	Latest time.Time `json:"latest,omitzero"`
	// LastSegment is the newest archived segment's name.
	LastSegment string `json:"lastSegment,omitempty"`
	// Segments is how many segments the archive holds.
	Segments int `json:"segments,omitempty"`
	// Gaps say what is missing, one per break (at most 16).
	Gaps []string `json:"gaps,omitempty"`
}
