package v1

// Defaults a BackupJob gets for the spec fields it leaves empty. They are the
// values of the +kubebuilder:default markers on BackupJobSpec, so the API
// server applies them to every BackupJob — with or without the backup
// operator's webhooks — and to objects stored before a default existed (when
// they are read). The database port, which depends on the engine, comes from
// cairnv1.DefaultPort (see cairn.dev/apis/meta/v1). DefaultRetentionDays is
// the one that is not a schema default: see RetentionDaysOrDefault.
//
// deploy/deploy_test checks that the generated CRD carries exactly these
// values, and the webhook integration test that a BackupJob created without
// webhooks gets the same defaults as one created through them.
const (
	DefaultTimeZone              = "UTC"
	DefaultRetentionDays         = int32(7)
	DefaultMaxRetries            = int32(3)
	DefaultActiveDeadlineSeconds = int64(3600)
	DefaultDeletionPolicy        = DeletionPolicyRetain
)

// SetDefaults fills the spec fields s leaves empty with the defaults above
// (what the API server does), and the database port with its engine's. Fields
// that are set are never changed. retentionDays is not filled: it has no
// schema default (retentionDays and retention are one or the other, and a
// default would hide which one the user chose); RetentionDaysOrDefault
// reads it.
func (s *BackupJobSpec) SetDefaults() {
	if s.TimeZone == "" {
		s.TimeZone = DefaultTimeZone
	}
	if s.MaxRetries == nil {
		s.MaxRetries = new(DefaultMaxRetries)
	}
	if s.ActiveDeadlineSeconds == nil {
		s.ActiveDeadlineSeconds = new(DefaultActiveDeadlineSeconds)
	}
	if s.DeletionPolicy == "" {
		s.DeletionPolicy = DefaultDeletionPolicy
	}
	s.Database.SetDefaults()
}

// RetentionDaysOrDefault is how many days the simple form of retention
// keeps artifacts: retentionDays, or DefaultRetentionDays when it is absent;
// 0 when calendar tiers (spec.retention) replace it.
func (s *BackupJobSpec) RetentionDaysOrDefault() int32 {
	switch {
	case s.Retention != nil:
		return 0
	case s.RetentionDays == 0:
		return DefaultRetentionDays
	}
	return s.RetentionDays
}
