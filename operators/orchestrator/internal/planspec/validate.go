package planspec

import (
	"fmt"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/util/validation/field"

	cairnv1 "cairn.dev/apis/meta/v1"
	platformv1 "cairn.dev/apis/platform/v1"
	"cairn.dev/libs/schedule"
	"cairn.dev/libs/validation"
)

// Kind names the kind in messages.
const Kind = "ProtectionPlan"

// ValidateName checks a plan's metadata.name.
func ValidateName(name string) field.ErrorList {
	return validation.NameLength(name, platformv1.MaxNameLength)
}

// ValidateSpec checks a (defaulted) plan spec; fldPath is the path of the
// spec. Every message names the field and says how to fix it.
func ValidateSpec(spec *platformv1.ProtectionPlanSpec, fldPath *field.Path) field.ErrorList {
	var errs field.ErrorList
	errs = append(errs, validation.Database(&spec.Database, fldPath.Child("database"), Kind)...)
	if _, err := schedule.LoadLocation(spec.TimeZone); err != nil {
		errs = append(errs, field.Invalid(fldPath.Child("timeZone"), spec.TimeZone, err.Error()))
	}
	bp := fldPath.Child("backup")
	if _, err := schedule.Parse(spec.Backup.Schedule, spec.TimeZone); err != nil {
		errs = append(errs, field.Invalid(bp.Child("schedule"), spec.Backup.Schedule, err.Error()))
	}
	errs = append(errs, validation.Storage(&spec.Backup.Storage, bp.Child("storage"), Kind)...)

	vp := fldPath.Child("verification")
	v := &spec.Verification
	switch {
	case v.EveryNBackups != nil && v.Schedule != nil:
		errs = append(errs, field.Forbidden(vp, "set exactly one of everyNBackups or schedule, not both"))
	case v.EveryNBackups == nil && v.Schedule == nil:
		errs = append(errs, field.Required(vp, "set how often to verify: everyNBackups (e.g. 7) or schedule (e.g. \"0 4 * * 0\")"))
	case v.EveryNBackups != nil && *v.EveryNBackups < 1:
		errs = append(errs, field.Invalid(vp.Child("everyNBackups"), *v.EveryNBackups, "must be at least 1 (1 verifies every backup)"))
	case v.Schedule != nil:
		if _, err := schedule.Parse(*v.Schedule, spec.TimeZone); err != nil {
			errs = append(errs, field.Invalid(vp.Child("schedule"), *v.Schedule, err.Error()))
		}
	}
	target := ScratchTarget(spec)
	errs = append(errs, validation.Database(&target, vp.Child("restoreInto"), Kind)...)
	seen := map[string]bool{}
	for i, c := range v.Checks {
		cp := vp.Child("checks").Index(i)
		if seen[c.Name] {
			errs = append(errs, field.Duplicate(cp.Child("name"), c.Name))
		}
		seen[c.Name] = true
		hasSQL := strings.TrimSpace(c.SQL) != ""
		switch {
		case hasSQL == c.RowCountsMatchBackup:
			errs = append(errs, field.Invalid(cp, c.Name, "set exactly one of sql (with equals, atLeast or atMost) or rowCountsMatchBackup: true"))
		case hasSQL && c.Equals == nil && c.AtLeast == nil && c.AtMost == nil:
			errs = append(errs, field.Required(cp.Child("equals"), "a sql check needs an expected result: equals, atLeast or atMost"))
		}
		if c.SQL != "" {
			errs = append(errs, validation.CheckSQL(target.Engine, c.SQL, cp.Child("sql"))...)
		}
	}

	errs = append(errs, validatePointInTime(spec, fldPath)...)

	op := fldPath.Child("objectives")
	o := &spec.Objectives
	errs = append(errs, positive(o.RPO.Duration, op.Child("rpo"), "e.g. \"26h\" for a nightly backup")...)
	if o.RTO != nil {
		errs = append(errs, positive(o.RTO.Duration, op.Child("rto"), "e.g. \"1h\"")...)
	}
	if o.MaxVerificationAge != nil {
		errs = append(errs, positive(o.MaxVerificationAge.Duration, op.Child("maxVerificationAge"), "e.g. \"192h\" for weekly verifications")...)
	}
	return errs
}

func positive(d time.Duration, p *field.Path, example string) field.ErrorList {
	if d < time.Minute {
		return field.ErrorList{field.Invalid(p, d.String(), "must be at least one minute, "+example)}
	}
	return nil
}

// ValidateDatabases checks what depends on the plan's namespace ns: the
// scratch database is not the protected one (ScratchError) and a
// migration's source is (MigrationSourceError). fldPath is the spec's path.
func ValidateDatabases(spec *platformv1.ProtectionPlanSpec, ns string, fldPath *field.Path) field.ErrorList {
	var errs field.ErrorList
	if ferr := ScratchError(spec, ns, fldPath.Child("verification", "restoreInto")); ferr != nil {
		errs = append(errs, ferr)
	}
	if ferr := MigrationSourceError(spec, ns, fldPath.Child("migration", "template", "source")); ferr != nil {
		errs = append(errs, ferr)
	}
	return errs
}

// ScratchError refuses a scratch database that is the protected database
// by address (SameDatabase). p is the path of restoreInto. The agent
// refuses it too, by the servers' identities, before it restores.
func ScratchError(spec *platformv1.ProtectionPlanSpec, ns string, p *field.Path) *field.Error {
	if !SameDatabase(spec.Database, ScratchTarget(spec), ns) {
		return nil
	}
	return field.Forbidden(p, fmt.Sprintf(
		"the scratch database %s is the protected database: every verification replaces its contents; choose another database name or server",
		Describe(ScratchTarget(spec))))
}

// MigrationSourceError refuses a migration template whose source is not the
// plan's database (same engine, host, port and database name). p is the
// path of the template's source.
func MigrationSourceError(spec *platformv1.ProtectionPlanSpec, ns string, p *field.Path) *field.Error {
	if spec.Migration == nil {
		return nil
	}
	src := spec.Migration.Template.Source
	if src.Engine == spec.Database.Engine && SameDatabase(spec.Database, src, ns) {
		return nil
	}
	return field.Invalid(p, Describe(src), fmt.Sprintf(
		"must be the plan's database %s (spec.database): a plan migrates the database it protects", Describe(spec.Database)))
}

// SameDatabase reports whether a and b, both seen from a plan in
// namespace ns, name the same database: validation.SameDatabase, the one
// spelling-based check every kind uses.
func SameDatabase(a, b cairnv1.DatabaseRef, ns string) bool {
	scope := validation.Scope{Namespace: ns}
	return validation.SameDatabase(a, scope, b, scope)
}

// Describe names a database in messages: "orders on orders-db.shop.svc:5432".
func Describe(db cairnv1.DatabaseRef) string {
	return fmt.Sprintf("%s on %s:%d", db.Database, db.Host, db.Port)
}

// Validate is every check of a plan named name in namespace ns with the
// (defaulted) spec: its name, its spec, its databases. The webhook and the
// controller both call it.
func Validate(name, ns string, spec *platformv1.ProtectionPlanSpec) field.ErrorList {
	errs := append(ValidateName(name), ValidateSpec(spec, field.NewPath("spec"))...)
	return append(errs, ValidateDatabases(spec, ns, field.NewPath("spec"))...)
}
