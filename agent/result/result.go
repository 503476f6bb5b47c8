// Package result defines what the Cairn agent reports when a command ends: one
// JSON line written to stdout and to the container's termination message
// (at most 4096 bytes, the kubelet's limit).
//
// Operators decode termination messages with Parse. The package depends on
// the standard library only, so importing it pulls nothing else into an
// operator's build.
//
// A successful backup or restore reports a Result:
//
//	{"artifact":"cairn/ns/job/ns_job_20260102T030405.123Z.pgdump.zst","size":1234,
//	 "checksum":"sha256:…","start":"2026-01-02T03:04:05.123Z","end":"…",
//	 "durationSeconds":1.5,"engine":"postgres"}
//
// A failed command reports a Failure: {"error":"backup: …"}.
package result

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
	// DropError says why a drop that was asked for did not happen (e.g.
	// "the target existed before the restore; it is never dropped").
	DropError string `json:"dropError,omitempty"`
}

// The restore's check contract, between the restore operator and `agent
// restore`.
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

// The words a failed restore's reason ends with when it created a scratch
// database (EnvDropTargetAfterChecks): dropped, or not (then why). The
// restore operator reports the one it finds.
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
	b, err := Marshal(r)
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
}

// FailedError is returned by Parse for a Failure message.
type FailedError struct{ Reason string }

func (e *FailedError) Error() string { return "agent failed: " + e.Reason }

// Marshal returns v as one JSON line (with the trailing newline).
func Marshal(v any) ([]byte, error) {
	b, err := json.Marshal(v)
	if err != nil {
		return nil, err
	}
	return append(b, '\n'), nil
}

// FailureLine returns a Failure as one JSON line that fits in
// MaxMessageBytes, shortening the reason if needed. Newlines in the reason
// are replaced by spaces so the message stays one line.
func FailureLine(reason string) []byte {
	reason = strings.Join(strings.Fields(reason), " ")
	b, _ := Marshal(Failure{Error: reason})
	for len(b) > MaxMessageBytes {
		// JSON escaping makes a rune at least one byte, so cutting the excess
		// (plus room for the ellipsis) in runes always shrinks the line.
		r := []rune(reason)
		cut := min(len(b)-MaxMessageBytes+4, len(r))
		reason = string(r[:len(r)-cut]) + "…"
		b, _ = Marshal(Failure{Error: reason})
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
	if raw, ok := probe["error"]; ok {
		var f Failure
		if err := json.Unmarshal(raw, &f.Error); err != nil {
			return nil, fmt.Errorf("malformed failure message: %w", err)
		}
		return nil, &FailedError{Reason: f.Error}
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
