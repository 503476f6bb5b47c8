package webhook

import (
	"context"
	"fmt"
	"net"
	"net/url"
	"path"
	"strings"

	apiequality "k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	backupv1 "cairn.dev/apis/backup/v1"
	cairnv1 "cairn.dev/apis/meta/v1"
	"cairn.dev/libs/schedule"
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
type Validator struct{}

var _ admission.Validator[*backupv1.BackupJob] = &Validator{}

// maxNameLength: the BackupJob's CronJob has its name, and a CronJob name
// allows 52 characters.
const maxNameLength = 52

// ValidateCreate implements admission.Validator.
func (*Validator) ValidateCreate(_ context.Context, bj *backupv1.BackupJob) (admission.Warnings, error) {
	var errs field.ErrorList
	if len(bj.Name) > maxNameLength {
		errs = append(errs, field.Invalid(field.NewPath("metadata", "name"), bj.Name,
			fmt.Sprintf("must be at most %d characters, because the CronJob is named after the BackupJob; choose a shorter name", maxNameLength)))
	}
	errs = append(errs, ValidateSpec(&bj.Spec, field.NewPath("spec"))...)
	return warnings(nil, bj), invalid(bj, errs)
}

// ValidateUpdate implements admission.Validator.
func (*Validator) ValidateUpdate(_ context.Context, oldBJ, newBJ *backupv1.BackupJob) (admission.Warnings, error) {
	if !newBJ.DeletionTimestamp.IsZero() {
		return nil, nil
	}
	w := warnings(oldBJ, newBJ)
	errs := ValidateSpec(&newBJ.Spec, field.NewPath("spec"))
	if len(errs) == 0 {
		return w, nil
	}
	old := oldBJ.DeepCopy()
	SetDefaults(old)
	if apiequality.Semantic.DeepEqual(old.Spec, newBJ.Spec) {
		for _, e := range errs {
			w = append(w, "the spec is invalid (allowed because this update does not change it): "+e.Error())
		}
		return w, nil
	}
	return w, invalid(newBJ, errs)
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

// ValidateSpec checks a (defaulted) BackupJob spec; fldPath is the path of
// the spec. Fields the defaults fill (timeZone, port, ...) may be empty. The
// controller uses it to report an invalid spec when the webhook was absent.
func ValidateSpec(spec *backupv1.BackupJobSpec, fldPath *field.Path) field.ErrorList {
	var errs field.ErrorList
	errs = append(errs, validateDatabase(&spec.Database, fldPath.Child("database"))...)

	if _, err := schedule.Parse(spec.Schedule, ""); err != nil {
		errs = append(errs, field.Invalid(fldPath.Child("schedule"), spec.Schedule, err.Error()))
	}
	if _, err := schedule.LoadLocation(spec.TimeZone); err != nil {
		errs = append(errs, field.Invalid(fldPath.Child("timeZone"), spec.TimeZone, err.Error()))
	}
	if spec.RetentionDays < 1 || spec.RetentionDays > 3650 {
		errs = append(errs, field.Invalid(fldPath.Child("retentionDays"), spec.RetentionDays,
			fmt.Sprintf("must be between 1 and 3650 days; omit it for the default, %d", DefaultRetentionDays)))
	}
	if r := spec.MaxRetries; r != nil && (*r < 0 || *r > 20) {
		errs = append(errs, field.Invalid(fldPath.Child("maxRetries"), *r,
			fmt.Sprintf("must be between 0 and 20; omit it for the default, %d", DefaultMaxRetries)))
	}
	if d := spec.ActiveDeadlineSeconds; d != nil && (*d < 60 || *d > 604800) {
		errs = append(errs, field.Invalid(fldPath.Child("activeDeadlineSeconds"), *d,
			fmt.Sprintf("must be between 60 (one minute) and 604800 (7 days) seconds; omit it for the default, %d", DefaultActiveDeadlineSeconds)))
	}
	errs = append(errs, validateStorage(&spec.Storage, fldPath.Child("storage"))...)
	switch spec.DeletionPolicy {
	case "", backupv1.DeletionPolicyRetain, backupv1.DeletionPolicyDelete:
	default:
		errs = append(errs, field.NotSupported(fldPath.Child("deletionPolicy"), spec.DeletionPolicy,
			[]backupv1.DeletionPolicy{backupv1.DeletionPolicyRetain, backupv1.DeletionPolicyDelete}))
	}
	return errs
}

func validateDatabase(db *cairnv1.DatabaseRef, p *field.Path) field.ErrorList {
	var errs field.ErrorList
	switch db.Engine {
	case cairnv1.PostgresEngine, cairnv1.MySQLEngine:
	case "":
		errs = append(errs, field.Required(p.Child("engine"), "set the database engine: postgres (PostgreSQL) or mysql (MySQL, MariaDB)"))
	default:
		errs = append(errs, field.NotSupported(p.Child("engine"), db.Engine,
			[]cairnv1.DatabaseEngine{cairnv1.PostgresEngine, cairnv1.MySQLEngine}))
	}
	errs = append(errs, validateHost(db.Host, p.Child("host"))...)
	if db.Port < 0 || db.Port > 65535 {
		errs = append(errs, field.Invalid(p.Child("port"), db.Port,
			fmt.Sprintf("must be between 1 and 65535; omit it for the engine's default (%d for postgres, %d for mysql)", DefaultPostgresPort, DefaultMySQLPort)))
	}
	if db.Database == "" {
		errs = append(errs, field.Required(p.Child("database"), "set the name of the database to back up"))
	}
	errs = append(errs, validateObjectName(db.CredentialsSecretRef.Name, p.Child("credentialsSecretRef", "name"),
		"a Secret in the BackupJob's namespace with the keys username and password")...)
	return errs
}

func validateHost(host string, p *field.Path) field.ErrorList {
	switch {
	case host == "":
		return field.ErrorList{field.Required(p, `set the host name or address of the database server, e.g. "postgres.shop.svc"`)}
	case strings.Contains(host, "://"):
		return field.ErrorList{field.Invalid(p, host, `must be a host name or address without a scheme, e.g. "postgres.shop.svc"`)}
	case net.ParseIP(host) != nil:
		return nil
	}
	if msgs := validation.IsDNS1123Subdomain(strings.ToLower(host)); len(msgs) > 0 {
		hint := ""
		if strings.Contains(host, ":") {
			hint = "; set the port in spec.database.port, not in the host"
		}
		return field.ErrorList{field.Invalid(p, host,
			fmt.Sprintf("must be a DNS name or an IP address, e.g. \"postgres.shop.svc\" (%s)%s", strings.Join(msgs, "; "), hint))}
	}
	return nil
}

// validateObjectName checks the name of an object in the BackupJob's
// namespace (Secret, PersistentVolumeClaim): a DNS-1123 subdomain.
func validateObjectName(name string, p *field.Path, what string) field.ErrorList {
	if name == "" {
		return field.ErrorList{field.Required(p, "set the name of "+what)}
	}
	if msgs := validation.IsDNS1123Subdomain(name); len(msgs) > 0 {
		return field.ErrorList{field.Invalid(p, name,
			fmt.Sprintf("must be the name of %s, a DNS-1123 subdomain: %s", what, strings.Join(msgs, "; ")))}
	}
	return nil
}

func validateStorage(st *cairnv1.StorageSpec, p *field.Path) field.ErrorList {
	var errs field.ErrorList
	switch {
	case st.PVC != nil && st.S3 != nil:
		errs = append(errs, field.Forbidden(p, "set exactly one of pvc or s3, not both: remove one of them"))
	case st.PVC == nil && st.S3 == nil:
		errs = append(errs, field.Required(p, "set exactly one of pvc (a PersistentVolumeClaim) or s3 (an S3-compatible bucket)"))
	}
	if pvc := st.PVC; pvc != nil {
		pp := p.Child("pvc")
		errs = append(errs, validateObjectName(pvc.ClaimName, pp.Child("claimName"),
			"a PersistentVolumeClaim in the BackupJob's namespace")...)
		if sp := pvc.SubPath; sp != "" && (path.IsAbs(sp) || hasDotDot(sp)) {
			errs = append(errs, field.Invalid(pp.Child("subPath"), sp, `must be a relative path without "..", e.g. "shop/orders"`))
		}
	}
	if s3 := st.S3; s3 != nil {
		sp := p.Child("s3")
		errs = append(errs, validateEndpoint(s3.Endpoint, sp.Child("endpoint"))...)
		switch {
		case s3.Bucket == "":
			errs = append(errs, field.Required(sp.Child("bucket"), "set the bucket name"))
		case strings.Contains(s3.Bucket, "/"):
			errs = append(errs, field.Invalid(sp.Child("bucket"), s3.Bucket,
				"must be a bucket name without \"/\"; put a path inside the bucket in spec.storage.s3.prefix"))
		case len(s3.Bucket) < 3 || len(s3.Bucket) > 63:
			errs = append(errs, field.Invalid(sp.Child("bucket"), s3.Bucket, "must be 3 to 63 characters long"))
		}
		errs = append(errs, validateObjectName(s3.CredentialsSecretRef.Name, sp.Child("credentialsSecretRef", "name"),
			"a Secret in the BackupJob's namespace with the keys accessKeyID and secretAccessKey")...)
	}
	return errs
}

func validateEndpoint(ep string, p *field.Path) field.ErrorList {
	if ep == "" {
		return field.ErrorList{field.Required(p, `set the S3 endpoint, host[:port] or an http(s) URL, e.g. "s3.eu-central-1.amazonaws.com" or "http://minio.storage.svc:9000"`)}
	}
	full := ep
	if !strings.Contains(full, "://") {
		full = "https://" + full
	}
	u, err := url.Parse(full)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || strings.Trim(u.Path, "/") != "" {
		return field.ErrorList{field.Invalid(p, ep,
			`must be host[:port] or an http(s) URL without a path, e.g. "s3.eu-central-1.amazonaws.com" or "http://minio.storage.svc:9000"; put the bucket in bucket and a path in prefix`)}
	}
	return nil
}

func hasDotDot(p string) bool {
	for _, part := range strings.Split(p, "/") {
		if part == ".." {
			return true
		}
	}
	return false
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
