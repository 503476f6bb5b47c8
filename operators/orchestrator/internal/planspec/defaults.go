// Package planspec holds what both the ProtectionPlan webhooks and the
// controller need to know about a plan's spec: its defaults, its validation,
// and the scratch-database guard (the scratch database is never the
// protected one). The controller applies the same defaults and checks again
// before every verification, for plans admitted while the webhooks were not
// running.
package planspec

import (
	backupv1 "cairn.dev/apis/backup/v1"
	cairnv1 "cairn.dev/apis/meta/v1"
	platformv1 "cairn.dev/apis/platform/v1"
	"cairn.dev/libs/validation"
)

// Defaults a plan gets for the fields it leaves empty.
const (
	DefaultTimeZone               = "UTC"
	DefaultRetentionDays          = int32(7)
	DefaultMaxRetries             = int32(3)
	DefaultActiveDeadlineSeconds  = int64(3600)
	DefaultVerificationTimeout    = int64(3600)
	DefaultSuccessfulHistoryLimit = int32(3)
	DefaultFailedHistoryLimit     = int32(3)
)

// SetDefaults fills the spec fields left empty. Fields that are set are
// never changed.
func SetDefaults(spec *platformv1.ProtectionPlanSpec) {
	if spec.TimeZone == "" {
		spec.TimeZone = DefaultTimeZone
	}
	if spec.Database.Port == 0 {
		spec.Database.Port = DefaultPort(spec.Database.Engine)
	}
	if spec.DeletionPolicy == "" {
		spec.DeletionPolicy = backupv1.DeletionPolicyRetain
	}
	b := &spec.Backup
	if b.RetentionDays == 0 {
		b.RetentionDays = DefaultRetentionDays
	}
	if b.MaxRetries == nil {
		b.MaxRetries = new(DefaultMaxRetries)
	}
	if b.ActiveDeadlineSeconds == nil {
		b.ActiveDeadlineSeconds = new(DefaultActiveDeadlineSeconds)
	}
	v := &spec.Verification
	if v.RestoreInto.Port == 0 {
		v.RestoreInto.Port = DefaultPort(spec.Database.Engine)
	}
	if v.TimeoutSeconds == nil {
		v.TimeoutSeconds = new(DefaultVerificationTimeout)
	}
	if v.SuccessfulHistoryLimit == nil {
		v.SuccessfulHistoryLimit = new(DefaultSuccessfulHistoryLimit)
	}
	if v.FailedHistoryLimit == nil {
		v.FailedHistoryLimit = new(DefaultFailedHistoryLimit)
	}
}

// DefaultPort is the engine's usual port, or 0 for an unknown engine.
func DefaultPort(engine cairnv1.DatabaseEngine) int32 {
	switch engine {
	case cairnv1.PostgresEngine:
		return validation.DefaultPostgresPort
	case cairnv1.MySQLEngine:
		return validation.DefaultMySQLPort
	}
	return 0
}

// ScratchTarget is the database a verification restores into, as a
// RestoreJob target: the scratch server and database with the protected
// database's engine.
func ScratchTarget(spec *platformv1.ProtectionPlanSpec) cairnv1.DatabaseRef {
	s := spec.Verification.RestoreInto
	port := s.Port
	if port == 0 {
		port = DefaultPort(spec.Database.Engine)
	}
	return cairnv1.DatabaseRef{
		Engine: spec.Database.Engine, Host: s.Host, Port: port, Database: s.Database,
		CredentialsSecretRef: s.CredentialsSecretRef,
	}
}
