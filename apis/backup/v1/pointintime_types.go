package v1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// PointInTimeSpec turns on point-in-time recovery: besides its scheduled
// dumps, the BackupJob streams the database's change log (MySQL/MariaDB:
// the binary log over the replication protocol) into the same store, in
// segments closed at least every maxSegmentAge, through an archiver the
// backup operator runs and owns (a Deployment "<name>-archiver", one
// replica). Each dump records where in the log it was taken, so a
// RestoreJob can restore any second between the oldest kept dump and the
// newest archived change (spec.source.pointInTime). docs/pitr.md.
// +kubebuilder:validation:XValidation:rule="!has(self.maxSegmentAge) || (duration(self.maxSegmentAge) >= duration('10s') && duration(self.maxSegmentAge) <= duration('1h'))",message="pointInTime.maxSegmentAge: between 10s and 1h"
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
}

// Defaults of spec.pointInTime.
const (
	DefaultMaxSegmentAge = "1m"
	DefaultMaxLag        = "5m"
)

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
)

// ArchiverSuffix makes the archiver Deployment's name: "<name>-archiver".
const ArchiverSuffix = "-archiver"

// ArchiverName is the name of bj's archiver Deployment.
func (bj *BackupJob) ArchiverName() string { return bj.Name + ArchiverSuffix }
