package v1

// Defaults a RestoreJob gets for the spec fields it leaves empty. They are the
// values of the +kubebuilder:default markers on RestoreJobSpec, so the API
// server applies them to every RestoreJob — with or without the restore
// operator's webhooks. The target port, which depends on the engine, comes
// from cairnv1.DefaultPort (see cairn.dev/apis/meta/v1).
//
// deploy/deploy_test checks that the generated CRD carries exactly these
// values, and the webhook integration test that a RestoreJob created without
// webhooks gets the same defaults as one created through them.
const (
	DefaultMaxRetries            = int32(3)
	DefaultActiveDeadlineSeconds = int64(3600)
)

// SetDefaults fills the spec fields s leaves empty with the defaults above
// (what the API server does), and the target port with its engine's. Fields
// that are set are never changed.
func (s *RestoreJobSpec) SetDefaults() {
	if s.MaxRetries == nil {
		s.MaxRetries = new(DefaultMaxRetries)
	}
	if s.ActiveDeadlineSeconds == nil {
		s.ActiveDeadlineSeconds = new(DefaultActiveDeadlineSeconds)
	}
	s.Target.SetDefaults()
}
