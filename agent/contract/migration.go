package contract

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"
)

// The migration contract between the migration operator and `agent migrate`.
//
// The operator runs one agent Job per step; the step is the first argument
// after "migrate" (`agent migrate precheck`, …). Each Job reports one
// MigrationResult line as its termination message. The source database is
// configured with the same CAIRN_ENGINE / CAIRN_DB_* variables as a backup;
// the target with the CAIRN_TARGET_DB_* variables below. A step that uses a
// store (export, import, and verify or precheck when the transfer goes
// through a store) is configured with the backup's CAIRN_STORE / CAIRN_S3_* /
// CAIRN_PVC_PATH variables.
//
// Steps and where their Job runs:
//
//	precheck   both sides reachable (direct): checks source and target.
//	precheck-source / precheck-target: one side each (store transfer; the
//	           target one runs in the target cluster).
//	copy       direct transfer: dump of the source streamed into the target.
//	export     store transfer, source cluster: dump to the store plus the
//	           source's per-table inventory (rows, checksum) taken in the
//	           dump's own snapshot.
//	import     store transfer, target cluster: restore the exported artifact.
//	verify     compares the target with the source per table, both
//	           directions; direct: live source against live target; store
//	           transfer: target against the inventory export recorded.
//	cutover    source cluster: the declared source-side cutover actions
//	           (CAIRN_CUTOVER_SOURCE_READ_ONLY).
//	cutover    also, in Full mode with verification, compares the source
//	           (writes stopped) with the target again before the operator
//	           switches anything; the source read-only is undone when that
//	           finds a difference or fails.
//	replication-start / replication-status / replication-stop: Continuous
//	           mode (PostgreSQL logical replication); replication-stop is
//	           cutover's: it waits until the target applied everything
//	           the source wrote before the stop.
//	abort      undoes what the migration did to the source on the way to
//	           Failed or deletion: drops the replication objects
//	           (subscription on the target when reachable; slot and
//	           publication on the source always) and, with
//	           CAIRN_CUTOVER_SOURCE_READ_ONLY=true, makes the source
//	           writable again.
const (
	StepPrecheck          = "precheck"
	StepPrecheckSource    = "precheck-source"
	StepPrecheckTarget    = "precheck-target"
	StepCopy              = "copy"
	StepExport            = "export"
	StepImport            = "import"
	StepVerify            = "verify"
	StepCutover           = "cutover"
	StepReplicationStart  = "replication-start"
	StepReplicationStatus = "replication-status"
	StepReplicationStop   = "replication-stop"
	StepAbort             = "abort"
)

// Steps lists every step of `agent migrate`.
var Steps = []string{StepPrecheck, StepPrecheckSource, StepPrecheckTarget, StepCopy, StepExport, StepImport, StepVerify,
	StepCutover, StepReplicationStart, StepReplicationStatus, StepReplicationStop, StepAbort}

// MigrationResult is what every `agent migrate` step reports. Fields a step
// does not produce are left empty. It must fit in MaxMessageBytes: use
// MarshalMigration, which drops matched tables from Verification.Tables (and
// counts them in Truncated) until it fits.
type MigrationResult struct {
	Step   string `json:"step"`
	Engine string `json:"engine"`

	// Precheck.
	SourceVersion string `json:"sourceVersion,omitempty"`
	TargetVersion string `json:"targetVersion,omitempty"`
	// Tables is the number of included tables on the source.
	Tables int `json:"tables,omitempty"`
	// EstimatedBytes is the source's size of the included tables.
	EstimatedBytes int64 `json:"estimatedBytes,omitempty"`
	// Problems are precheck findings that block the migration, each one
	// sentence naming the object ("target already has table public.orders").
	// A precheck with problems still exits 0; the operator decides.
	Problems []string `json:"problems,omitempty"`

	// Copy, export, import.
	TablesDone int   `json:"tablesDone,omitempty"`
	Bytes      int64 `json:"bytes,omitempty"`
	// Artifact, Size, Checksum: export's stored artifact (as Result).
	Artifact string `json:"artifact,omitempty"`
	Size     int64  `json:"size,omitempty"`
	Checksum string `json:"checksum,omitempty"`

	// Verify.
	Verification *Verification `json:"verification,omitempty"`

	// Replication (Continuous).
	Replication *Replication `json:"replication,omitempty"`

	// Actions (cutover, and copy's reset of an earlier attempt): what the
	// step changed, one sentence each ("source database shop is read-only
	// (default_transaction_read_only=on); ended 3 sessions").
	Actions []string `json:"actions,omitempty"`

	// Recopied (cutover, Full, direct transfer, writes stopped): the
	// tables that changed since verification and were copied again into
	// the target before the final comparison.
	Recopied []string `json:"recopied,omitempty"`

	// Warnings are findings that do not fail the step but that the user
	// must see, one sentence each naming the object ("table public.x is not
	// replicated: created after replication-start").
	Warnings []string `json:"warnings,omitempty"`

	DurationSeconds float64 `json:"durationSeconds,omitempty"`
}

// Verification is the per-table comparison.
type Verification struct {
	// Method is RowCount or Checksum.
	Method     string `json:"method"`
	Tables     int    `json:"tables"`
	Matched    int    `json:"matched"`
	Mismatched int    `json:"mismatched"`
	// CatchingUp (Continuous verification): tables still being written
	// when the re-checks ended — not found different, not found equal;
	// cutover's exact check decides. They do not fail verification.
	CatchingUp int `json:"catchingUp,omitempty"`
	// Rechecks (Continuous verification): the most re-checks any table
	// took.
	Rechecks int `json:"rechecks,omitempty"`
	// Items: mismatches first, then matched tables, each sorted by name.
	Items []TableCheck `json:"items,omitempty"`
	// Truncated is how many matched tables were left out of Items to fit
	// the termination message (mismatches are never left out before matches).
	Truncated int `json:"truncated,omitempty"`
}

// TableCheck is one table's comparison. Rows are -1 when the table is
// missing on that side.
type TableCheck struct {
	Table      string `json:"t"`
	SourceRows int64  `json:"s"`
	TargetRows int64  `json:"d"`
	Match      bool   `json:"ok"`
	// Reason when !Match: "rows differ", "content differs", "missing on
	// target", "only on target".
	Reason string `json:"r,omitempty"`
	// State (Continuous verification): StateMatched, StateCatchingUp or
	// StateDiffers; only StateDiffers counts in Mismatched.
	State string `json:"st,omitempty"`
	// Rechecks (Continuous verification): how many times the table (or its
	// differing rows) was compared again after the target had applied the
	// source's changes up to the source's WAL position read after the
	// source was read.
	Rechecks int `json:"n,omitempty"`
	// Rows (Continuous verification, not matched): how many rows (by
	// primary key) still differ; 0 when compared as a whole table.
	Rows int `json:"k,omitempty"`
	// LagBytes (StateCatchingUp): how far the target was behind the source
	// when the re-checks ended.
	LagBytes int64 `json:"lag,omitempty"`
}

// States of a table in a Continuous migration's verification.
const (
	StateMatched    = "matched"
	StateCatchingUp = "catchingUp"
	StateDiffers    = "differs"
)

// Replication is the state of a Continuous migration's logical replication.
type Replication struct {
	Publication  string `json:"publication"`
	Subscription string `json:"subscription"`
	Slot         string `json:"slot"`
	// LagBytes: source's current WAL LSN minus what the subscription confirmed.
	LagBytes int64 `json:"lagBytes"`
	// LagSeconds: the source's walsender's replay_lag for the subscription
	// (how long ago the last change the target applied was written); 0
	// when caught up or unknown.
	LagSeconds float64 `json:"lagSeconds,omitempty"`
	// RetainedWALBytes: WAL the slot keeps on the source.
	RetainedWALBytes int64 `json:"retainedWalBytes"`
	// SyncedTables / Tables: tables whose initial sync finished.
	SyncedTables int `json:"syncedTables"`
	Tables       int `json:"tables"`
	// NotReplicated are included source tables that the publication does
	// not cover: created after replication-start (the publication names
	// the tables that existed then). Their rows do not reach the target;
	// each is also a warning of the result.
	NotReplicated []string `json:"notReplicated,omitempty"`
}

// MarshalMigration returns r as one JSON line of at most MaxMessageBytes:
// matched tables are dropped from the end of Verification.Items (counted in
// Truncated) and then mismatched ones, until it fits.
func MarshalMigration(r MigrationResult) ([]byte, error) {
	b, err := Marshal(r)
	if err != nil {
		return nil, err
	}
	if r.Verification != nil {
		v := *r.Verification
		v.Items = append([]TableCheck(nil), v.Items...)
		r.Verification = &v
		for len(b) > MaxMessageBytes && len(v.Items) > 0 {
			v.Items = v.Items[:len(v.Items)-1]
			v.Truncated++
			if b, err = Marshal(r); err != nil {
				return nil, err
			}
		}
	}
	for len(b) > MaxMessageBytes && len(r.Warnings) > 1 {
		r.Warnings = r.Warnings[:len(r.Warnings)-1]
		if b, err = Marshal(r); err != nil {
			return nil, err
		}
	}
	if len(b) > MaxMessageBytes && r.Replication != nil && len(r.Replication.NotReplicated) > 1 {
		rep := *r.Replication
		r.Replication = &rep
		for len(b) > MaxMessageBytes && len(rep.NotReplicated) > 1 {
			rep.NotReplicated = rep.NotReplicated[:len(rep.NotReplicated)-1]
			if b, err = Marshal(r); err != nil {
				return nil, err
			}
		}
	}
	for len(b) > MaxMessageBytes && len(r.Problems) > 1 {
		r.Problems = r.Problems[:len(r.Problems)-1]
		if b, err = Marshal(r); err != nil {
			return nil, err
		}
	}
	if len(b) > MaxMessageBytes {
		return nil, fmt.Errorf("migration result does not fit %d bytes", MaxMessageBytes)
	}
	return b, nil
}

// ParseMigration decodes a termination message of `agent migrate`. A failure
// message yields a *FailedError.
func ParseMigration(message string) (*MigrationResult, error) {
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
	var r MigrationResult
	if err := json.Unmarshal([]byte(message), &r); err != nil {
		return nil, fmt.Errorf("malformed migration result: %w", err)
	}
	if r.Step == "" {
		return nil, fmt.Errorf("migration result lacks its step: %q", truncate(message, 200))
	}
	return &r, nil
}
