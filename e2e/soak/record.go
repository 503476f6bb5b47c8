package soak

import (
	"fmt"
	"sort"
	"strings"
	"time"

	"cairn.dev/agent/contract"
)

// What the soak saw happen, as plain data: the invariant checks
// (invariants.go) read nothing else, so a unit test can hand them a bad
// history and see them fail.

// Job kinds, by the Cairn object that owns the Job.
const (
	KindBackup    = "backup"
	KindRestore   = "restore"
	KindMigration = "migration"
)

// JobRecord is one Job (by UID) as the recorder saw it over its life.
type JobRecord struct {
	UID, Name string
	// Kind is KindBackup, KindRestore or KindMigration.
	Kind string
	// Owner names the BackupJob, RestoreJob or MigrationJob the Job runs
	// for (its label).
	Owner string
	// RunKind is the backup operator's run label: scheduled, run-now, ...
	RunKind string
	// Scheduled is the CronJob controller's scheduled time of a scheduled
	// run (zero for other Jobs).
	Scheduled time.Time
	Created   time.Time
	// Finished is when the Job completed or failed (zero while it runs).
	Finished  time.Time
	Succeeded bool
	// Result is the agent's result of a succeeded backup (from its pod's
	// termination message), when the recorder saw the pod.
	Result *contract.Result
	// FailedPods counts the Job's pods that ended Failed (agent kills,
	// S3 down: the Job controller's retries).
	FailedPods int
	// Vanished: the Job was deleted before the recorder saw it finish.
	Vanished bool
}

// Active says whether the Job was running at t (created by then, not
// finished before).
func (j JobRecord) Active(t time.Time) bool {
	return !j.Created.After(t) && (j.Finished.IsZero() || !j.Finished.Before(t))
}

// EventRecord is one Event about a Cairn object (events.k8s.io/v1).
type EventRecord struct {
	UID string
	// Regarding is the object's name, Related the Job's (may be empty).
	Regarding, Related string
	Reason, Note       string
	// Count is how many times it was reported (a series counts more than one).
	Count int
}

// ScheduleWindow is the time in which a BackupJob's CronJob (every minute)
// should have started a run each minute.
type ScheduleWindow struct {
	BackupJob string
	// From: minutes after it (the CronJob's creation) are due.
	From time.Time
	// To: minutes up to it are due (the suspension, less a margin for the
	// CronJob controller's delay).
	To time.Time
}

// Minutes are the scheduled minutes in the window.
func (w ScheduleWindow) Minutes() []time.Time {
	var out []time.Time
	for m := w.From.Truncate(time.Minute).Add(time.Minute); !m.After(w.To); m = m.Add(time.Minute) {
		out = append(out, m)
	}
	return out
}

// StoreObject is an object of the bucket: its size and SHA-256.
type StoreObject struct {
	Size   int64
	SHA256 string // "sha256:<hex>"
}

// Manifest is one catalog entry (<dir>/entries/<artifact>.json) as read
// from the store.
type Manifest struct {
	// Key of the manifest; Artifact the key of the artifact it lists.
	Key, Artifact string
	Size          int64
	Checksum      string
}

// Store is what the bucket holds under the soak's prefixes.
type Store struct {
	Objects   map[string]StoreObject
	Manifests []Manifest
}

// RestoreRecord is one RestoreJob and what its target held after it.
type RestoreRecord struct {
	Name string
	// Verification: a ProtectionPlan's verification RestoreJob (its scratch
	// database is dropped; the plan's checks compare it), not the soak's.
	Verification bool
	Engine       string
	// Phase at the end: Succeeded, Failed, or what it was stuck in.
	Phase    string
	Artifact string
	// Compared: the soak compared the target's tables with the source's
	// (its own RestoreJobs, once Succeeded); Differences lists what
	// differed (none: equal).
	Compared    bool
	Differences []string
	Message     string
}

// MigrationRecord is the Continuous MigrationJob's end.
type MigrationRecord struct {
	Name  string
	Phase string
	// Compared: target and source compared after the cutover; Differences
	// lists the tables that differ.
	Compared    bool
	Differences []string
	// Deleted: the MigrationJob is gone after its deletion.
	Deleted bool
	// Left are the replication objects still on the servers after the
	// deletion (slots, publications, subscriptions).
	Left []string
	// Rows written by the load while it ran (information).
	Load string
}

// RSSSample is one operator pod's resident memory at a moment.
type RSSSample struct {
	At       time.Time
	Operator string
	Pod      string
	Leader   bool
	Bytes    int64
}

// Terminating is an object still there after its deletion was asked for.
type Terminating struct {
	Kind, Namespace, Name string
	Since                 time.Time
}

// OperatorExit is an operator container that ended by itself (not killed
// by the soak): OOMKilled, or an exit (a leader losing its lease exits on
// purpose).
type OperatorExit struct {
	Pod, Reason string
	ExitCode    int32
	At          time.Time
}

// History is everything the checks read.
type History struct {
	Jobs        []JobRecord
	Events      []EventRecord
	Windows     []ScheduleWindow
	Store       Store
	Restores    []RestoreRecord
	Migration   *MigrationRecord
	Terminating []Terminating
	RSS         []RSSSample
	Exits       []OperatorExit
	// RSSLimit is the growth the memory check allows: end ≤ start ×
	// RSSFactor + RSSSlack.
	RSSFactor float64
	RSSSlack  int64
}

func (h *History) backupRuns(owner string) []JobRecord {
	var out []JobRecord
	for _, j := range h.Jobs {
		if j.Kind == KindBackup && j.Owner == owner && (j.RunKind == "scheduled" || j.RunKind == "run-now") {
			out = append(out, j)
		}
	}
	sort.Slice(out, func(a, b int) bool { return out[a].Created.Before(out[b].Created) })
	return out
}

func mib(b int64) string { return fmt.Sprintf("%.1f MiB", float64(b)/(1<<20)) }

func clock(t time.Time) string {
	if t.IsZero() {
		return "-"
	}
	return t.UTC().Format("15:04:05")
}

func list(items []string, max int) string {
	if len(items) > max {
		return strings.Join(items[:max], "; ") + fmt.Sprintf("; … %d more", len(items)-max)
	}
	return strings.Join(items, "; ")
}
