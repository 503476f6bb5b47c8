package v1

import "k8s.io/apimachinery/pkg/api/resource"

// Defaults a MigrationJob gets for the spec fields it leaves empty. They are
// the values of the +kubebuilder:default markers on MigrationJobSpec, so the
// API server applies them to every MigrationJob, with or without the
// migration operator's webhooks. The ports, which depend on the engine, come
// from cairnv1.DefaultPort (the deploy base's MutatingAdmissionPolicy).
const (
	DefaultMode                  = ModeFull
	DefaultTransferMethod        = TransferDirect
	DefaultParallelism           = int32(4)
	DefaultVerify                = VerifyChecksum
	DefaultCutoverMode           = CutoverManual
	DefaultMaxRetries            = int32(2)
	DefaultActiveDeadlineSeconds = int64(86400)
	DefaultKubeconfigKey         = "kubeconfig"
)

// DefaultMaxRetainedWAL is the retained-WAL limit of Continuous mode when
// spec.replication.maxRetainedWAL is not set.
var DefaultMaxRetainedWAL = resource.MustParse("10Gi")

// SetDefaults fills the spec fields s leaves empty with the defaults above
// (what the API server does), and both ports with their engine's. Fields
// that are set are never changed.
func (s *MigrationJobSpec) SetDefaults() {
	if s.Mode == "" {
		s.Mode = DefaultMode
	}
	if s.Transfer.Method == "" {
		s.Transfer.Method = DefaultTransferMethod
	}
	if s.Transfer.Parallelism == nil {
		s.Transfer.Parallelism = new(DefaultParallelism)
	}
	if s.Verify == "" {
		s.Verify = DefaultVerify
	}
	if s.Cutover.Mode == "" {
		s.Cutover.Mode = DefaultCutoverMode
	}
	if s.MaxRetries == nil {
		s.MaxRetries = new(DefaultMaxRetries)
	}
	if s.ActiveDeadlineSeconds == nil {
		s.ActiveDeadlineSeconds = new(DefaultActiveDeadlineSeconds)
	}
	if r := s.Target.KubeconfigSecretRef; r != nil && r.Key == "" {
		r.Key = DefaultKubeconfigKey
	}
	s.Source.SetDefaults()
	s.Target.SetDefaults()
}

// MaxRetainedWALBytes is the retained-WAL limit in bytes.
func (s *MigrationJobSpec) MaxRetainedWALBytes() int64 {
	if s.Replication != nil && s.Replication.MaxRetainedWAL != nil {
		return s.Replication.MaxRetainedWAL.Value()
	}
	return DefaultMaxRetainedWAL.Value()
}
