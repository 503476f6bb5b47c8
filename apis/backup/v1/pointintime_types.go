package v1

import (
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// PointInTimeSpec turns on point-in-time recovery: besides its scheduled
// dumps, the BackupJob streams the database's change log (MySQL/MariaDB:
// the binary log; PostgreSQL: the write-ahead log through a physical
// replication slot, with physical base backups) into the same store, in
// segments closed at least every maxSegmentAge, through an archiver the
// backup operator runs and owns (a Deployment "<name>-archiver", one
// replica), and checks the archive (and PostgreSQL's slot) every
// checkInterval with an archive-status Job. Each dump records where in the log it was taken, so a
// RestoreJob can restore any second between the oldest kept dump and the
// newest archived change (spec.source.pointInTime). docs/pitr.md.
// +kubebuilder:validation:XValidation:rule="!has(self.maxSegmentAge) || (duration(self.maxSegmentAge) >= duration('10s') && duration(self.maxSegmentAge) <= duration('1h'))",message="pointInTime.maxSegmentAge: between 10s and 1h"
// +kubebuilder:validation:XValidation:rule="!has(self.checkInterval) || (duration(self.checkInterval) >= duration('1m') && duration(self.checkInterval) <= duration('1h'))",message="pointInTime.checkInterval: between 1m and 1h"
// +kubebuilder:validation:XValidation:rule="!has(self.maxRetainedWAL) || quantity(string(self.maxRetainedWAL)).compareTo(quantity('256Mi')) >= 0",message="pointInTime.maxRetainedWAL: at least 256Mi (a slot retains a segment or two of 16 MB in normal running)"
// +kubebuilder:validation:XValidation:rule="!has(self.maxLag) || duration(self.maxLag) >= (has(self.maxSegmentAge) ? duration(self.maxSegmentAge) : duration('1m'))",message="pointInTime.maxLag: at least maxSegmentAge (a segment may take that long to close)"
type PointInTimeSpec struct {
	// MaxSegmentAge is the longest a change waits before it is archived
	// while the archiver runs: the recovery point objective. Defaults to
	// 1m; at least 10s, at most 1h.
	// +optional
	MaxSegmentAge *metav1.Duration `json:"maxSegmentAge,omitempty"`

	// MaxLag is how far the newest archived change may fall behind before
	// the archiver reports itself not ready and PointInTimeReady turns
	// False. Defaults to 5m; at least maxSegmentAge.
	// +optional
	MaxLag *metav1.Duration `json:"maxLag,omitempty"`

	// MaxRetainedWAL (PostgreSQL) is the most write-ahead log the
	// archiver's replication slot may keep on the source while the archive
	// falls behind (the archiver down, the store unreachable): past it the
	// slot is dropped — by the archiver while it runs, by the operator's
	// archive-status check while it does not — so the source's disk never
	// fills; the archive then shows a gap. Defaults to 10Gi; at least 256Mi
	// (sixteen 16 MB segments: a slot retains a segment or two in normal
	// running). The server's own max_slot_wal_keep_size, where set, bounds
	// it too.
	// +optional
	MaxRetainedWAL *resource.Quantity `json:"maxRetainedWAL,omitempty"`

	// CheckInterval is how often the operator runs an archive-status Job
	// that reads the archive (segments, gaps, the newest archived second)
	// and, for PostgreSQL, the slot's retained WAL (dropping it past
	// maxRetainedWAL). Defaults to 5m; between 1m and 1h.
	// +optional
	CheckInterval *metav1.Duration `json:"checkInterval,omitempty"`
}

// Defaults of spec.pointInTime.
const (
	DefaultMaxSegmentAge = "1m"
	DefaultMaxLag        = "5m"
	DefaultCheckInterval = "5m"
)

// DefaultMaxRetainedWAL is spec.pointInTime.maxRetainedWAL's default.
var DefaultMaxRetainedWAL = resource.MustParse("10Gi")

// MaxRetainedWALBytes is the slot's retained-WAL limit in bytes.
func (p *PointInTimeSpec) MaxRetainedWALBytes() int64 {
	if p != nil && p.MaxRetainedWAL != nil {
		return p.MaxRetainedWAL.Value()
	}
	return DefaultMaxRetainedWAL.Value()
}

// PointInTimeStatus is what the archive can recover, as the last backup
// run read the store's archive and the archiver reports.
type PointInTimeStatus struct {
	// Earliest is the earliest second a RestoreJob can recover to: the
	// end of the oldest kept dump taken with point-in-time on.
	// +optional
	Earliest *metav1.Time `json:"earliest,omitempty"`
	// Latest is the newest archived change, when last read.
	// +optional
	Latest *metav1.Time `json:"latest,omitempty"`
	// LastSegment is the newest archived segment (a binary log file name).
	// +optional
	LastSegment string `json:"lastSegment,omitempty"`
	// Segments is how many segments the archive holds.
	// +optional
	Segments int32 `json:"segments,omitempty"`
	// Gaps name every break in the archive (a missing or unreadable
	// segment): a restore across one is refused.
	// +optional
	// +kubebuilder:validation:MaxItems=16
	Gaps []string `json:"gaps,omitempty"`
	// ReadTime is when the archive was last read (by a backup run).
	// +optional
	ReadTime *metav1.Time `json:"readTime,omitempty"`
	// Archiver is the archiver Deployment's name.
	// +optional
	Archiver string `json:"archiver,omitempty"`
	// Check is what the last archive-status Job found.
	// +optional
	Check *ArchiveCheck `json:"check,omitempty"`
}

// ArchiveCheck is the result of the operator's periodic archive-status Job:
// the archive as the store holds it and, for PostgreSQL, the archiver's
// replication slot on the source.
type ArchiveCheck struct {
	// Checks counts the archive-status Jobs run (it names the next one).
	Checks int32 `json:"checks"`
	// Time is when the last check finished.
	// +optional
	Time *metav1.Time `json:"time,omitempty"`
	// Message says why the last check failed, if it did.
	// +optional
	Message string `json:"message,omitempty"`
	// Slot is the archiver's replication slot (PostgreSQL).
	// +optional
	Slot string `json:"slot,omitempty"`
	// SlotExists: the slot was on the source at the check.
	// +optional
	SlotExists bool `json:"slotExists,omitempty"`
	// RetainedWALBytes is the WAL the slot kept on the source.
	// +optional
	RetainedWALBytes int64 `json:"retainedWALBytes,omitempty"`
	// SlotDroppedTime is when a check last dropped the slot because it
	// retained more than spec.pointInTime.maxRetainedWAL.
	// +optional
	SlotDroppedTime *metav1.Time `json:"slotDroppedTime,omitempty"`
	// MaxSlotWALKeepSize is the source's own bound on a slot ("-1": none).
	// +optional
	MaxSlotWALKeepSize string `json:"maxSlotWALKeepSize,omitempty"`
}

// PointInTimeReadyCondition is True while the archive is continuous and
// the archiver keeps up (its readiness: lag within spec.pointInTime.maxLag);
// False with ArchiverNotReady or ArchiveGap. Absent without point-in-time.
const PointInTimeReadyCondition = "PointInTimeReady"

// Reasons of PointInTimeReady.
const (
	// ArchivingReason: the archiver is ready and the archive has no gap.
	ArchivingReason = "Archiving"
	// ArchiverNotReadyReason: the archiver has no ready replica (starting,
	// failing, or behind by more than maxLag).
	ArchiverNotReadyReason = "ArchiverNotReady"
	// ArchiveGapReason: the archive misses a segment; restores across it
	// are refused.
	ArchiveGapReason = "ArchiveGap"
	// SlotDroppedReason: the archiver's replication slot retained more
	// than maxRetainedWAL and was dropped (the source kept safe); the
	// archive has a gap from there until a new backup.
	SlotDroppedReason = "SlotDropped"
)

// ArchiveCheckSuffix makes the names of the archive-status Jobs:
// "<name>-archive-check-<n>".
const ArchiveCheckSuffix = "-archive-check-"

// ArchiverSuffix makes the archiver Deployment's name: "<name>-archiver".
const ArchiverSuffix = "-archiver"

// ArchiverName is the name of bj's archiver Deployment.
func (bj *BackupJob) ArchiverName() string { return bj.Name + ArchiverSuffix }
