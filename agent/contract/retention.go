package contract

import (
	"encoding/json"
	"errors"
	"fmt"
	"time"
)

// Retention is a calendar-tier retention policy: the JSON of EnvRetention
// and of a BackupJob's spec.retention (without dryRun). Every tier keeps,
// for each of its N most recent periods (hours, days, ISO weeks, months,
// years in the BackupJob's time zone, EnvTimeZone) that hold a backup, the
// newest backup of that period; KeepLast keeps the N newest; MinVerified
// keeps the N newest backups a ProtectionPlan verification restored with
// every check passed (recorded in the store next to the artifact), whatever
// the tiers say. The newest backup is always kept. A backup kept for any
// reason is kept.
type Retention struct {
	KeepLast    int `json:"keepLast,omitempty"`
	KeepHourly  int `json:"keepHourly,omitempty"`
	KeepDaily   int `json:"keepDaily,omitempty"`
	KeepWeekly  int `json:"keepWeekly,omitempty"`
	KeepMonthly int `json:"keepMonthly,omitempty"`
	KeepYearly  int `json:"keepYearly,omitempty"`
	MinVerified int `json:"minVerified,omitempty"`
}

// ParseRetention decodes EnvRetention; it needs at least one tier and no
// negative count.
func ParseRetention(s string) (*Retention, error) {
	var r Retention
	if err := json.Unmarshal([]byte(s), &r); err != nil {
		return nil, fmt.Errorf("retention %q is not a JSON policy such as {\"keepDaily\":7,\"keepMonthly\":12}: %v", s, err)
	}
	for name, n := range map[string]int{"keepLast": r.KeepLast, "keepHourly": r.KeepHourly, "keepDaily": r.KeepDaily,
		"keepWeekly": r.KeepWeekly, "keepMonthly": r.KeepMonthly, "keepYearly": r.KeepYearly, "minVerified": r.MinVerified} {
		if n < 0 {
			return nil, fmt.Errorf("retention: %s is %d: must not be negative", name, n)
		}
	}
	if r.KeepLast+r.KeepHourly+r.KeepDaily+r.KeepWeekly+r.KeepMonthly+r.KeepYearly == 0 {
		return nil, errors.New("retention: set at least one of keepLast, keepHourly, keepDaily, keepWeekly, keepMonthly, keepYearly")
	}
	return &r, nil
}

// Reasons a retention report gives for keeping an artifact.
const (
	KeepNewest     = "newest"
	KeepLastReason = "last"
	KeepHourly     = "hourly"
	KeepDaily      = "daily"
	KeepWeekly     = "weekly"
	KeepMonthly    = "monthly"
	KeepYearly     = "yearly"
	KeepVerified   = "verified"
	KeepWithinDays = "retentionDays"
	KeepLocked     = "locked"
)

// RetentionReport is what a prune (or a backup's prune afterwards) decided:
// each kept artifact with why, newest first, and the artifacts the policy
// deletes (deleted, or with DryRun only listed). Names are the artifacts'
// file names (the catalog's), not full paths.
type RetentionReport struct {
	// DryRun: nothing was deleted; Pruned is what a prune would delete.
	DryRun bool `json:"dryRun,omitempty"`
	// TimeZone the tiers were evaluated in.
	TimeZone string         `json:"timeZone,omitempty"`
	Kept     []KeptArtifact `json:"kept,omitempty"`
	Pruned   []string       `json:"pruned,omitempty"`
	// Truncated counts the kept artifacts (oldest) and pruned names left
	// out to fit the termination message.
	Truncated int `json:"truncated,omitempty"`
}

// KeptArtifact is one artifact a retention policy keeps, and why (Keep…).
type KeptArtifact struct {
	Artifact string   `json:"artifact"`
	Reasons  []string `json:"reasons"`
	// LockedUntil is the artifact's S3 Object Lock retain-until date as the
	// prune found or extended it; absent when the store does not lock.
	LockedUntil *time.Time `json:"lockedUntil,omitempty"`
}

// shrink drops the oldest kept artifacts and the last pruned names, one at
// a time, counting them in Truncated; false when nothing is left to drop.
func (r *RetentionReport) shrink() bool {
	switch {
	case r == nil:
		return false
	case len(r.Pruned) > 0:
		r.Pruned = r.Pruned[:len(r.Pruned)-1]
	case len(r.Kept) > 0:
		r.Kept = r.Kept[:len(r.Kept)-1]
	default:
		return false
	}
	r.Truncated++
	return true
}

// MarshalSummary returns s as one JSON line of at most MaxMessageBytes,
// shortening its retention report until it fits.
func MarshalSummary(s Summary) ([]byte, error) {
	if s.Retention != nil {
		r := *s.Retention
		r.Kept, r.Pruned = append([]KeptArtifact(nil), r.Kept...), append([]string(nil), r.Pruned...)
		s.Retention = &r
	}
	for {
		b, err := Marshal(s)
		if err != nil || len(b) <= MaxMessageBytes || !s.Retention.shrink() {
			return b, err
		}
	}
}
