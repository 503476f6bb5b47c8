package restorespec

import (
	"path"
	"strings"
	"time"
	"unicode"

	k8svalidation "k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"

	restorev1 "cairn.dev/apis/restore/v1"
	"cairn.dev/libs/validation"
)

// MaxNameLength is the longest RestoreJob name: its Job is named
// <name>-restore, and a Job name is at most 63 characters.
const MaxNameLength = 63 - len("-restore")

// MaxArtifactLength is the longest artifact reference.
const MaxArtifactLength = 1024

// ValidateName checks a RestoreJob's metadata.name.
func ValidateName(name string) field.ErrorList { return validation.NameLength(name, MaxNameLength) }

// ValidateSpec checks a (defaulted) RestoreJob spec; fldPath is the path of
// the spec. Every message names the field and says how to fix it. The target
// and the store are checked by cairn.dev/libs/validation, as for every kind.
func ValidateSpec(spec *restorev1.RestoreJobSpec, fldPath *field.Path) field.ErrorList {
	var errs field.ErrorList
	errs = append(errs, validateSource(&spec.Source, fldPath.Child("source"))...)
	errs = append(errs, validation.Database(&spec.Target, fldPath.Child("target"), "RestoreJob")...)
	for i, c := range spec.Checks {
		if c.SQL != "" {
			errs = append(errs, validation.CheckSQL(spec.Target.Engine, c.SQL, fldPath.Child("checks").Index(i).Child("sql"))...)
		}
	}
	errs = append(errs, validation.Attempts(spec.MaxRetries, restorev1.DefaultMaxRetries,
		spec.ActiveDeadlineSeconds, restorev1.DefaultActiveDeadlineSeconds, 7, fldPath)...)
	return errs
}

func validateSource(src *restorev1.RestoreSource, p *field.Path) field.ErrorList {
	var errs field.ErrorList
	switch {
	case src.BackupJob != nil && src.Store != nil:
		return field.ErrorList{field.Forbidden(p, "set exactly one of backupJob or store, not both: backupJob restores from a BackupJob in this namespace, store from a store and catalog key")}
	case src.BackupJob == nil && src.Store == nil:
		return field.ErrorList{field.Required(p, "set exactly one of backupJob (a BackupJob in this namespace) or store (a store, the catalog key and the artifact)")}
	}
	if bj := src.BackupJob; bj != nil {
		bp := p.Child("backupJob")
		errs = append(errs, validation.ObjectName(bj.Name, bp.Child("name"), "a BackupJob in the RestoreJob's namespace")...)
		if bj.Artifact != "" {
			errs = append(errs, validateArtifact(bj.Artifact, bp.Child("artifact"))...)
		}
	}
	if t := src.PointInTime; t != "" {
		pp := p.Child("pointInTime")
		if _, err := time.Parse(time.RFC3339, t); t != "latest" && err != nil {
			errs = append(errs, field.Invalid(pp, t, "an RFC 3339 time with its zone (2026-12-05T14:03:07+08:00) or \"latest\""))
		}
		switch {
		case src.BackupJob == nil:
			errs = append(errs, field.Forbidden(pp, "restores a BackupJob's archive: set source.backupJob (a BackupJob with spec.pointInTime)"))
		case src.BackupJob.Artifact != "":
			errs = append(errs, field.Forbidden(pp, "not with source.backupJob.artifact: the newest dump taken before that time is the base"))
		}
	}
	if st := src.Store; st != nil {
		sp := p.Child("store")
		errs = append(errs, validation.Storage(&st.Storage, sp.Child("storage"), "RestoreJob")...)
		errs = append(errs, validateCatalogKey(st.BackupJob, sp.Child("backupJob"))...)
		if st.Artifact == "" {
			errs = append(errs, field.Required(sp.Child("artifact"),
				"set the artifact to restore, a name or path as `agent list` prints it, e.g. \"shop_orders_20260102T030405.123Z.pgdump.zst\""))
		} else {
			errs = append(errs, validateArtifact(st.Artifact, sp.Child("artifact"))...)
		}
	}
	return errs
}

// validateCatalogKey checks "namespace/name".
func validateCatalogKey(key string, p *field.Path) field.ErrorList {
	if key == "" {
		return field.ErrorList{field.Required(p, `set the catalog key the artifact was written under: "namespace/name" of the BackupJob that wrote it, e.g. "shop/orders-db"`)}
	}
	ns, name, ok := strings.Cut(key, "/")
	if !ok || strings.Contains(name, "/") {
		return field.ErrorList{field.Invalid(p, key, `must be "namespace/name" of the BackupJob that wrote the artifact, e.g. "shop/orders-db"`)}
	}
	var msgs []string
	for _, m := range k8svalidation.IsDNS1123Label(ns) {
		msgs = append(msgs, "namespace: "+m)
	}
	for _, m := range k8svalidation.IsDNS1123Subdomain(name) {
		msgs = append(msgs, "name: "+m)
	}
	if len(msgs) > 0 {
		return field.ErrorList{field.Invalid(p, key, `must be "namespace/name" of the BackupJob that wrote the artifact, e.g. "shop/orders-db": `+strings.Join(msgs, "; "))}
	}
	return nil
}

// validateArtifact checks a reference to an artifact: its name, or its path
// in the store as `agent list` prints it.
func validateArtifact(ref string, p *field.Path) field.ErrorList {
	switch {
	case len(ref) > MaxArtifactLength:
		return field.ErrorList{field.TooLong(p, ref, MaxArtifactLength)}
	case strings.IndexFunc(ref, func(r rune) bool { return unicode.IsSpace(r) || unicode.IsControl(r) }) >= 0:
		return field.ErrorList{field.Invalid(p, ref, "must be an artifact name or path without spaces, as `agent list` prints it")}
	case path.IsAbs(ref) || hasDotDot(ref):
		return field.ErrorList{field.Invalid(p, ref, `must be an artifact name or a relative path in the store without "..", e.g. "shop_orders_20260102T030405.123Z.pgdump.zst"`)}
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

// Validate is every check of a RestoreJob named name with the (defaulted)
// spec: its name and its spec. The webhook and the controller both call it.
func Validate(name string, spec *restorev1.RestoreJobSpec) field.ErrorList {
	return append(ValidateName(name), ValidateSpec(spec, field.NewPath("spec"))...)
}
