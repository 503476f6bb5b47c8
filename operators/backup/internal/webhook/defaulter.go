package webhook

import (
	"context"

	admissionv1 "k8s.io/api/admission/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	backupv1 "cairn.dev/apis/backup/v1"
	cairnv1 "cairn.dev/apis/meta/v1"
)

// Defaults a BackupJob gets for the fields it leaves empty.
const (
	DefaultTimeZone              = "UTC"
	DefaultRetentionDays         = int32(7)
	DefaultMaxRetries            = int32(3)
	DefaultActiveDeadlineSeconds = int64(3600)
	DefaultDeletionPolicy        = backupv1.DeletionPolicyRetain
	DefaultPostgresPort          = int32(5432)
	DefaultMySQLPort             = int32(3306)
)

// Defaulter is the BackupJob mutating webhook: it fills defaults (SetDefaults)
// on create and update, and adds backupv1.CleanupFinalizer on create, so the
// controller needs no extra write for it. It never adds the finalizer on
// update: a finalizer removed by hand (the escape hatch) stays removed.
type Defaulter struct{}

var _ admission.Defaulter[*backupv1.BackupJob] = &Defaulter{}

// Default implements admission.Defaulter. Which operation it serves comes
// from the admission request in ctx; without one it only fills defaults.
func (*Defaulter) Default(ctx context.Context, bj *backupv1.BackupJob) error {
	SetDefaults(bj)
	if req, err := admission.RequestFromContext(ctx); err == nil &&
		req.Operation == admissionv1.Create && bj.DeletionTimestamp.IsZero() {
		if controllerutil.AddFinalizer(bj, backupv1.CleanupFinalizer) {
			ctrl.LoggerFrom(ctx).V(1).Info("adding finalizer", "finalizer", backupv1.CleanupFinalizer)
		}
	}
	return nil
}

// SetDefaults fills the spec fields bj leaves empty: timeZone UTC,
// retentionDays 7, maxRetries 3, activeDeadlineSeconds 3600, deletionPolicy
// Retain, and database.port 5432 for postgres or 3306 for mysql (left empty
// for an unknown engine, which validation rejects). Fields that are set are
// never changed. The controller calls it too, for objects admitted while the
// webhook was not installed.
func SetDefaults(bj *backupv1.BackupJob) {
	s := &bj.Spec
	if s.TimeZone == "" {
		s.TimeZone = DefaultTimeZone
	}
	if s.RetentionDays == 0 {
		s.RetentionDays = DefaultRetentionDays
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
	if s.Database.Port == 0 {
		switch s.Database.Engine {
		case cairnv1.PostgresEngine:
			s.Database.Port = DefaultPostgresPort
		case cairnv1.MySQLEngine:
			s.Database.Port = DefaultMySQLPort
		}
	}
}
