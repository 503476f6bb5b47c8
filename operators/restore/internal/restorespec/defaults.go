// Package restorespec holds what both the RestoreJob webhooks and the
// controller need to know about a RestoreJob spec: its defaults, its
// validation, and the overwrite guard that refuses to restore into the
// database a BackupJob backs up. The controller applies the same defaults and
// checks again, for objects admitted while the webhooks were not running.
package restorespec

import (
	cairnv1 "cairn.dev/apis/meta/v1"
	restorev1 "cairn.dev/apis/restore/v1"
	"cairn.dev/libs/validation"
)

// Defaults a RestoreJob gets for the fields it leaves empty.
const (
	DefaultMaxRetries            = int32(3)
	DefaultActiveDeadlineSeconds = int64(3600)
	DefaultPostgresPort          = validation.DefaultPostgresPort
	DefaultMySQLPort             = validation.DefaultMySQLPort
)

// SetDefaults fills the spec fields left empty: maxRetries 3,
// activeDeadlineSeconds 3600, and target.port 5432 for postgres or 3306 for
// mysql (left empty for an unknown engine, which validation rejects). Fields
// that are set are never changed.
func SetDefaults(spec *restorev1.RestoreJobSpec) {
	if spec.MaxRetries == nil {
		spec.MaxRetries = new(DefaultMaxRetries)
	}
	if spec.ActiveDeadlineSeconds == nil {
		spec.ActiveDeadlineSeconds = new(DefaultActiveDeadlineSeconds)
	}
	if spec.Target.Port == 0 {
		spec.Target.Port = DefaultPort(spec.Target.Engine)
	}
}

// DefaultPort is the engine's usual port, or 0 for an unknown engine.
func DefaultPort(engine cairnv1.DatabaseEngine) int32 {
	switch engine {
	case cairnv1.PostgresEngine:
		return DefaultPostgresPort
	case cairnv1.MySQLEngine:
		return DefaultMySQLPort
	}
	return 0
}
