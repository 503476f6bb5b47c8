package webhook

import (
	"context"
	"fmt"
	"slices"
	"strings"

	apiequality "k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	backupv1 "cairn.dev/apis/backup/v1"
	"cairn.dev/libs/access"
	"cairn.dev/libs/schedule"
	cairnvalidation "cairn.dev/libs/validation"
)

// Validator is the BackupJob validating webhook. It rejects what the CRD
// schema cannot check (a cron expression that does not parse, an unknown time
// zone, malformed names, ...) with one message per field that names the
// field path and the fix, and warns about legal but surprising settings.
//
// On update it validates the new object too, with two exceptions that keep
// objects admitted before the webhook existed deletable and manageable: an
// object being deleted is never blocked, and an update that leaves the
// (defaulted) spec as it was is allowed, its spec errors returned as warnings.
//
// Then it checks the requester (libs/access): on create they must be allowed
// to get every Secret the BackupJob names; on update, the Secrets the update
// adds, and every one of them again when the update changes where a
// credential or the data goes (database host, port, name; S3 endpoint,
// bucket, prefix, region, insecure; claim; recipients; Object Lock);
// removing encryption also needs the recipients' Secret or ConfigMap, and
// is warned about, as is removing or shortening Object Lock. Refused: "spec.database.credentialsSecretRef: user "alice" may not
// get secret "db-admin" in namespace "team-a"".
type Validator struct {
	// Guard reviews the requester's rights; nil skips it (unit tests).
	Guard *access.Guard
}

var _ admission.Validator[*backupv1.BackupJob] = &Validator{}

// maxNameLength: the BackupJob's CronJob has its name, and a CronJob name
// allows 52 characters.
const maxNameLength = 52

// ValidateCreate implements admission.Validator.
func (v *Validator) ValidateCreate(ctx context.Context, bj *backupv1.BackupJob) (admission.Warnings, error) {
	var errs field.ErrorList
	if len(bj.Name) > maxNameLength {
		errs = append(errs, field.Invalid(field.NewPath("metadata", "name"), bj.Name,
			fmt.Sprintf("must be at most %d characters, because the CronJob is named after the BackupJob; choose a shorter name", maxNameLength)))
	}
	errs = append(errs, ValidateSpec(&bj.Spec, field.NewPath("spec"))...)
	if err := invalid(bj, errs); err != nil {
		return warnings(nil, bj), err
	}
	_, err := v.admit(ctx, nil, bj)
	return warnings(nil, bj), err
}

// admit checks the requester's rights on bj's references (old nil on
// create); on update, those whose uses the update changes (a new host,
// endpoint, bucket, recipients, Object Lock, ...) and what removing
// encryption or weakening Object Lock needs, with its warnings.
func (v *Validator) admit(ctx context.Context, old, bj *backupv1.BackupJob) (admission.Warnings, error) {
	if v.Guard == nil {
		return nil, nil
	}
	gr := backupv1.GroupVersion.WithResource("backupjobs").GroupResource()
	if old == nil {
		return nil, v.Guard.Admit(ctx, gr, access.BackupJobKind, bj, nil, access.BackupJobChecks(bj), nil)
	}
	weak := access.BackupJobWeakening(old, bj)
	return weak.Warnings, v.Guard.Admit(ctx, gr, access.BackupJobKind, bj, old, access.BackupJobChecks(bj), access.BackupJobChecks(old), weak.Checks...)
}

// ValidateUpdate implements admission.Validator.
func (v *Validator) ValidateUpdate(ctx context.Context, oldBJ, newBJ *backupv1.BackupJob) (admission.Warnings, error) {
	if !newBJ.DeletionTimestamp.IsZero() {
		return nil, nil
	}
	w := warnings(oldBJ, newBJ)
	aw, err := v.admit(ctx, oldBJ, newBJ)
	w = append(w, aw...)
	if err != nil {
		return w, err
	}
	errs := legacyRetention(oldBJ, newBJ, ValidateSpec(&newBJ.Spec, field.NewPath("spec")))
	if len(errs) == 0 {
		return w, nil
	}
	old := oldBJ.DeepCopy()
	old.Spec.SetDefaults()
	if apiequality.Semantic.DeepEqual(old.Spec, newBJ.Spec) {
		for _, e := range errs {
			w = append(w, "the spec is invalid (allowed because this update does not change it): "+e.Error())
		}
		return w, nil
	}
	return w, invalid(newBJ, errs)
}

const bothRetentions = "set either retentionDays (the simple form) or retention (calendar tiers), not both"

// legacyRetention drops the "not both" error of an update that keeps the
// retentionDays an object was stored with beside retention: before the
// rule, the schema defaulted retentionDays to 7 whatever else was set, and
// such an object stays updatable while that value is unchanged (retention
// wins; the CRD's rule allows the same through oldSelf).
func legacyRetention(oldBJ, newBJ *backupv1.BackupJob, errs field.ErrorList) field.ErrorList {
	o, n := &oldBJ.Spec, &newBJ.Spec
	if o.Retention == nil || o.RetentionDays == 0 || o.RetentionDays != n.RetentionDays {
		return errs
	}
	return slices.DeleteFunc(errs, func(e *field.Error) bool {
		return e.Type == field.ErrorTypeForbidden && e.Field == "spec.retentionDays" && e.Detail == bothRetentions
	})
}

// ValidateDelete implements admission.Validator; deletion is never refused.
func (*Validator) ValidateDelete(context.Context, *backupv1.BackupJob) (admission.Warnings, error) {
	return nil, nil
}

func invalid(bj *backupv1.BackupJob, errs field.ErrorList) error {
	if len(errs) == 0 {
		return nil
	}
	return apierrors.NewInvalid(backupv1.GroupVersion.WithKind("BackupJob").GroupKind(), bj.Name, errs)
}

// ValidateSpec checks a BackupJob spec; fldPath is the path of the spec.
// Fields the API's defaults fill (timeZone, port, ...) may be empty. Only the
// webhook calls it; without the webhook the CRD's schema and CEL rules are
// the checks, and the controller reports a schedule or time zone it cannot
// use as Stalled/InvalidSpec.
func ValidateSpec(spec *backupv1.BackupJobSpec, fldPath *field.Path) field.ErrorList {
	var errs field.ErrorList
	errs = append(errs, cairnvalidation.Database(&spec.Database, fldPath.Child("database"), "BackupJob")...)

	if _, err := schedule.Parse(spec.Schedule, ""); err != nil {
		errs = append(errs, field.Invalid(fldPath.Child("schedule"), spec.Schedule, err.Error()))
	}
	if _, err := schedule.LoadLocation(spec.TimeZone); err != nil {
		errs = append(errs, field.Invalid(fldPath.Child("timeZone"), spec.TimeZone, err.Error()))
	}
	if spec.RetentionDays != 0 && (spec.RetentionDays < 1 || spec.RetentionDays > 3650) {
		errs = append(errs, field.Invalid(fldPath.Child("retentionDays"), spec.RetentionDays,
			fmt.Sprintf("must be between 1 and 3650 days; omit it for the default, %d", backupv1.DefaultRetentionDays)))
	}
	if spec.RetentionDays != 0 && spec.Retention != nil {
		errs = append(errs, field.Forbidden(fldPath.Child("retentionDays"), bothRetentions))
	}
	errs = append(errs, cairnvalidation.Attempts(spec.MaxRetries, backupv1.DefaultMaxRetries,
		spec.ActiveDeadlineSeconds, backupv1.DefaultActiveDeadlineSeconds, 7, fldPath)...)
	errs = append(errs, cairnvalidation.Storage(&spec.Storage, fldPath.Child("storage"), "BackupJob")...)
	switch spec.DeletionPolicy {
	case "", backupv1.DeletionPolicyRetain, backupv1.DeletionPolicyDelete:
	default:
		errs = append(errs, field.NotSupported(fldPath.Child("deletionPolicy"), spec.DeletionPolicy,
			[]backupv1.DeletionPolicy{backupv1.DeletionPolicyRetain, backupv1.DeletionPolicyDelete}))
	}
	return errs
}

// warnings are legal settings that may not do what the user expects. old is
// nil on create.
func warnings(old, bj *backupv1.BackupJob) admission.Warnings {
	var w admission.Warnings
	if req, ok := bj.Annotations[backupv1.RunNowAnnotation]; ok && bj.Spec.Suspend && req != bj.Status.LastRunNowRequest {
		w = append(w, fmt.Sprintf("spec.suspend is true: the run requested by annotation %s does not start while the BackupJob is suspended", backupv1.RunNowAnnotation))
	}
	if s3 := bj.Spec.Storage.S3; s3 != nil && (s3.Insecure || strings.HasPrefix(s3.Endpoint, "http://")) {
		w = append(w, "spec.storage.s3: plain HTTP: credentials and backups travel unencrypted; use an https endpoint")
	}
	if bj.Spec.DeletionPolicy == backupv1.DeletionPolicyDelete && (old == nil || old.Spec.DeletionPolicy != backupv1.DeletionPolicyDelete) {
		w = append(w, "spec.deletionPolicy is Delete: deleting this BackupJob deletes all its stored backups")
	}
	return w
}
