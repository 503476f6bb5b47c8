package v1

import (
	backupv1 "cairn.dev/apis/backup/v1"
	cairnv1 "cairn.dev/apis/meta/v1"
)

// Defaults a ProtectionPlan gets for the spec fields it leaves empty. They
// are the values of the +kubebuilder:default markers on the spec types, so
// the API server applies them with or without the orchestrator's webhooks.
// The ports, which depend on the engine, come from cairnv1.DefaultPort; the
// orchestrator's webhook and controller fill them in.
const (
	DefaultTimeZone               = "UTC"
	DefaultMaxRetries             = backupv1.DefaultMaxRetries
	DefaultActiveDeadlineSeconds  = backupv1.DefaultActiveDeadlineSeconds
	DefaultDeletionPolicy         = backupv1.DeletionPolicyRetain
	DefaultVerificationTimeout    = int64(3600)
	DefaultSuccessfulHistoryLimit = int32(3)
	DefaultFailedHistoryLimit     = int32(3)
)

// SetDefaults fills the spec fields s leaves empty with the defaults above,
// and the database and scratch ports with the protected engine's. Fields
// that are set are never changed.
func (s *ProtectionPlanSpec) SetDefaults() {
	if s.TimeZone == "" {
		s.TimeZone = DefaultTimeZone
	}
	if s.DeletionPolicy == "" {
		s.DeletionPolicy = DefaultDeletionPolicy
	}
	s.Database.SetDefaults()
	b := &s.Backup
	if b.MaxRetries == nil {
		b.MaxRetries = new(DefaultMaxRetries)
	}
	if b.ActiveDeadlineSeconds == nil {
		b.ActiveDeadlineSeconds = new(DefaultActiveDeadlineSeconds)
	}
	v := &s.Verification
	if v.RestoreInto.Port == 0 {
		v.RestoreInto.Port = cairnv1.DefaultPort(s.Database.Engine)
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
