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
