package contract

import (
	"crypto/sha256"
	"encoding/hex"
	"strings"
	"time"
)

// ArchiveStatus is the result line of `agent archive-status` (PostgreSQL
// and MySQL/MariaDB point-in-time archives): the archive's state as the
// store holds it and, for PostgreSQL, the archiver's replication slot on
// the source — what the backup operator's watchdog and status need. With
// EnvArchiveMaxRetainedWALBytes set, a slot retaining more WAL than that
// has been dropped by this run (SlotDropped): the source is never held
// back by an archive that fell behind; the archive shows a gap from there.
type ArchiveStatus struct {
	Command   string `json:"command"` // "archive-status"
	BackupJob string `json:"backupJob"`
	Engine    string `json:"engine"`
	// Dir is the archive's folder in the store.
	Dir string `json:"dir"`
	// Segments is the number of archived segments; Oldest and Newest the
	// first and last segment files.
	Segments int    `json:"segments"`
	Oldest   string `json:"oldest,omitempty"`
	Newest   string `json:"newest,omitempty"`
	// NewestArchivedAt: when the newest segment was stored; LatestCovered:
	// the newest second every change before which is archived.
	NewestArchivedAt time.Time `json:"newestArchivedAt,omitzero"`
	LatestCovered    time.Time `json:"latestCovered,omitzero"`
	// Gaps lists every break in the archive (a missing segment, a
	// timeline change), one sentence each.
	Gaps []string `json:"gaps,omitempty"`

	// PostgreSQL: the archiver's physical replication slot.
	Slot             string `json:"slot,omitempty"`
	SlotExists       bool   `json:"slotExists,omitempty"`
	RetainedWALBytes int64  `json:"retainedWALBytes,omitempty"`
	// MaxRetainedWALBytes is the limit applied (0: none); SlotDropped: this
	// run dropped the slot, which retained more.
	MaxRetainedWALBytes int64 `json:"maxRetainedWALBytes,omitempty"`
	SlotDropped         bool  `json:"slotDropped,omitempty"`
	// SlotReleased: this run dropped the slot because it was asked to
	// (EnvArchiveReleaseSlot), not for its size.
	SlotReleased bool `json:"slotReleased,omitempty"`
	// MaxSlotWALKeepSize is the source's own bound on a slot ("-1": none).
	MaxSlotWALKeepSize string `json:"maxSlotWALKeepSize,omitempty"`
}

// ParseArchiveStatus decodes an `archive-status` termination message; an
// agent failure is a *FailedError.
func ParseArchiveStatus(message string) (*ArchiveStatus, error) {
	return parseReport[ArchiveStatus](message, CommandArchiveStatus)
}

// SlotName is the physical replication slot of a BackupJob's PostgreSQL
// archiver ("<namespace>/<name>"): deterministic, so a restarted archiver
// (or the operator's watchdog and release) finds it; readable where the
// name allows, and made unique by a hash of the whole key. At most 63
// characters of [a-z0-9_].
func SlotName(job string) string {
	sum := sha256.Sum256([]byte(job))
	readable := strings.Map(func(r rune) rune {
		if 'a' <= r && r <= 'z' || '0' <= r && r <= '9' {
			return r
		}
		return '_'
	}, strings.ToLower(job))
	const prefix = "cairn_pitr_"
	suffix := "_" + hex.EncodeToString(sum[:4])
	if max := 63 - len(prefix) - len(suffix); len(readable) > max {
		readable = readable[:max]
	}
	return prefix + readable + suffix
}
