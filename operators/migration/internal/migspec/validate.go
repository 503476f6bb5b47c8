// Package migspec checks a MigrationJob's spec the same way for the
// admission webhook and the controller (for objects admitted while the
// webhook was not running). The CRD carries the same rules as CEL, so an
// install without webhooks refuses the same specs.
package migspec

import (
	"fmt"
	"reflect"
	"regexp"
	"strings"

	corev1 "k8s.io/api/core/v1"
	k8svalidation "k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"

	cairnv1 "cairn.dev/apis/meta/v1"
	migrationv1 "cairn.dev/apis/migration/v1"
	"cairn.dev/libs/agentjob"
	"cairn.dev/libs/validation"
)

// MaxNameLength is the longest MigrationJob name: its step Jobs are named
// <name>-<step> (the longest suffix, "-rstatus-NNNNNN", is 15 characters) and
// a Job name is at most 63 characters.
const MaxNameLength = 48

var objectPattern = regexp.MustCompile(migrationv1.ObjectPattern)

// ValidateName checks a MigrationJob's metadata.name.
func ValidateName(name string) field.ErrorList { return validation.NameLength(name, MaxNameLength) }

// ValidateSpec checks a (defaulted) MigrationJob spec at fldPath.
func ValidateSpec(spec *migrationv1.MigrationJobSpec, fldPath *field.Path) field.ErrorList {
	var errs field.ErrorList
	sp, tp := fldPath.Child("source"), fldPath.Child("target")
	errs = append(errs, validation.Database(&spec.Source, sp, "MigrationJob")...)
	errs = append(errs, validation.Database(&spec.Target.DatabaseRef, tp, "MigrationJob")...)
	if spec.Source.Engine != spec.Target.Engine && spec.Source.Engine != "" && spec.Target.Engine != "" {
		errs = append(errs, field.Invalid(tp.Child("engine"), spec.Target.Engine,
			fmt.Sprintf("must be the source's engine (%s): a migration moves postgres to postgres or mysql to mysql", spec.Source.Engine)))
	}
	if r := spec.Target.KubeconfigSecretRef; r != nil {
		errs = append(errs, validation.ObjectName(r.Name, tp.Child("kubeconfigSecretRef", "name"),
			"a Secret in the MigrationJob's namespace holding the target cluster's kubeconfig")...)
		if r.Key != "" {
			for _, m := range k8svalidation.IsConfigMapKey(r.Key) {
				errs = append(errs, field.Invalid(tp.Child("kubeconfigSecretRef", "key"), r.Key, m))
			}
		}
	}
	if ns := spec.Target.Namespace; ns != "" {
		if spec.Target.KubeconfigSecretRef == nil {
			errs = append(errs, field.Forbidden(tp.Child("namespace"),
				"only with kubeconfigSecretRef: a target in this cluster is reached from Jobs in the MigrationJob's namespace"))
		}
		for _, m := range k8svalidation.IsDNS1123Label(ns) {
			errs = append(errs, field.Invalid(tp.Child("namespace"), ns, m))
		}
	}
	switch spec.Mode {
	case migrationv1.ModeFull, migrationv1.ModeSchemaOnly:
	case migrationv1.ModeContinuous:
		if spec.Source.Engine != cairnv1.PostgresEngine {
			errs = append(errs, field.Invalid(fldPath.Child("mode"), spec.Mode,
				"Continuous needs postgres (PostgreSQL logical replication); use Full for mysql"))
		}
		if spec.Transfer.Method != migrationv1.TransferDirect {
			errs = append(errs, field.Invalid(fldPath.Child("mode"), spec.Mode,
				"Continuous needs transfer.method Direct (the target database subscribes to the source)"))
		}
	default:
		errs = append(errs, field.NotSupported(fldPath.Child("mode"), spec.Mode,
			[]migrationv1.Mode{migrationv1.ModeFull, migrationv1.ModeSchemaOnly, migrationv1.ModeContinuous}))
	}
	if spec.Replication != nil && spec.Mode != migrationv1.ModeContinuous {
		errs = append(errs, field.Forbidden(fldPath.Child("replication"), "only with mode Continuous"))
	}
	if spec.Replication != nil && spec.Replication.MaxRetainedWAL != nil && spec.Replication.MaxRetainedWAL.Sign() <= 0 {
		errs = append(errs, field.Invalid(fldPath.Child("replication", "maxRetainedWAL"), spec.Replication.MaxRetainedWAL.String(), "must be positive, e.g. 10Gi"))
	}
	if o := spec.Objects; o != nil {
		errs = append(errs, patterns(o.Include, fldPath.Child("objects", "include"))...)
		errs = append(errs, patterns(o.Exclude, fldPath.Child("objects", "exclude"))...)
	}
	trp := fldPath.Child("transfer")
	switch spec.Transfer.Method {
	case migrationv1.TransferDirect:
		if spec.Transfer.Storage != nil {
			errs = append(errs, field.Forbidden(trp.Child("storage"), "only with method Store: a Direct transfer streams the dump into the target"))
		}
	case migrationv1.TransferStore:
		if spec.Transfer.Storage == nil {
			errs = append(errs, field.Required(trp.Child("storage"), "a Store transfer needs a store reachable from both clusters: pvc or s3"))
		} else {
			limit, limitPath := memoryLimit(spec, fldPath)
			errs = append(errs, validation.StorageWithin(spec.Transfer.Storage, trp.Child("storage"), "MigrationJob", limit, limitPath)...)
		}
	default:
		errs = append(errs, field.NotSupported(trp.Child("method"), spec.Transfer.Method,
			[]migrationv1.TransferMethod{migrationv1.TransferDirect, migrationv1.TransferStore}))
	}
	if p := spec.Transfer.Parallelism; p != nil && (*p < 1 || *p > 64) {
		errs = append(errs, field.Invalid(trp.Child("parallelism"), *p, "must be between 1 and 64"))
	}
	switch spec.Verify {
	case migrationv1.VerifyNone, migrationv1.VerifyRowCount, migrationv1.VerifyChecksum:
	default:
		errs = append(errs, field.NotSupported(fldPath.Child("verify"), spec.Verify,
			[]migrationv1.VerifyMethod{migrationv1.VerifyNone, migrationv1.VerifyRowCount, migrationv1.VerifyChecksum}))
	}
	cp := fldPath.Child("cutover")
	switch spec.Cutover.Mode {
	case migrationv1.CutoverManual, migrationv1.CutoverAuto:
	default:
		errs = append(errs, field.NotSupported(cp.Child("mode"), spec.Cutover.Mode,
			[]migrationv1.CutoverMode{migrationv1.CutoverManual, migrationv1.CutoverAuto}))
	}
	if s := spec.Cutover.SwitchSecret; s != nil {
		errs = append(errs, validation.ObjectName(s.Name, cp.Child("switchSecret", "name"),
			"a Secret in the MigrationJob's namespace whose host, port and database keys are switched to the target")...)
		if s.Name == spec.Source.CredentialsSecretRef.Name || s.Name == spec.Target.CredentialsSecretRef.Name {
			errs = append(errs, field.Invalid(cp.Child("switchSecret", "name"), s.Name,
				"must not be a credentials Secret of the source or the target: name the Secret your applications read their connection from"))
		}
	}
	errs = append(errs, validation.Attempts(spec.MaxRetries, migrationv1.DefaultMaxRetries,
		spec.ActiveDeadlineSeconds, migrationv1.DefaultActiveDeadlineSeconds, 30, fldPath)...)
	return errs
}

func patterns(ps []string, p *field.Path) field.ErrorList {
	var errs field.ErrorList
	seen := map[string]bool{}
	for i, s := range ps {
		switch {
		case len(s) > migrationv1.ObjectPatternMaxLength:
			errs = append(errs, field.TooLong(p.Index(i), s, migrationv1.ObjectPatternMaxLength))
		case !objectPattern.MatchString(s):
			errs = append(errs, field.Invalid(p.Index(i), s,
				`must be "schema.table" or "schema": letters, digits, "_", "$", "-", with "*" (any run of characters) and "?" (one character), e.g. "public.order*" or "sales"`))
		case seen[s]:
			errs = append(errs, field.Duplicate(p.Index(i), s))
		}
		seen[s] = true
	}
	return errs
}

// TargetScope is where the target's host is resolved, seen from a
// MigrationJob in namespace ns: every Job of a Direct transfer runs here
// (kubeconfigSecretRef only says where the target lives), so its target
// address is resolved here too; with Store and kubeconfigSecretRef the
// target's Jobs run in the other cluster, in target.namespace.
func TargetScope(spec *migrationv1.MigrationJobSpec, ns string) validation.Scope {
	t := spec.Target
	if t.KubeconfigSecretRef == nil || spec.Transfer.Method != migrationv1.TransferStore {
		return validation.Scope{Namespace: ns}
	}
	if t.Namespace != "" {
		ns = t.Namespace
	}
	return validation.Scope{Namespace: ns, Cluster: "target"}
}

// SameDatabase reports whether source and target are the same database
// by address (validation.SameDatabase: every spelling of one address;
// the agent compares the servers themselves before it writes). ns is the
// MigrationJob's namespace; spec must be defaulted.
func SameDatabase(spec *migrationv1.MigrationJobSpec, ns string) bool {
	return validation.SameDatabase(spec.Source, validation.Scope{Namespace: ns}, spec.Target.DatabaseRef, TargetScope(spec, ns))
}

// SameDatabaseError refuses a target that is the source (SameDatabase),
// at fldPath (the spec).
func SameDatabaseError(spec *migrationv1.MigrationJobSpec, ns string, fldPath *field.Path) *field.Error {
	if !SameDatabase(spec, ns) {
		return nil
	}
	return field.Invalid(fldPath.Child("target"), describe(spec.Target.DatabaseRef),
		"is the source database (the same host, port and database, however spelt): migrate into another database")
}

// ValidateUpdate refuses a change of anything but spec.cutover.approved
// and spec.cutover.writersStopped. Both specs must be defaulted.
func ValidateUpdate(old, cur *migrationv1.MigrationJobSpec, fldPath *field.Path) field.ErrorList {
	a, b := old.DeepCopy(), cur.DeepCopy()
	a.Cutover.Approved, b.Cutover.Approved = false, false
	a.Cutover.WritersStopped, b.Cutover.WritersStopped = false, false
	if reflect.DeepEqual(a, b) {
		return nil
	}
	var errs field.ErrorList
	for _, f := range changedFields(a, b) {
		errs = append(errs, field.Forbidden(fldPath.Child(f), "is immutable (only spec.cutover.approved and spec.cutover.writersStopped may change): create a new MigrationJob"))
	}
	return errs
}

// changedFields names the top-level spec fields that differ.
func changedFields(a, b *migrationv1.MigrationJobSpec) []string {
	av, bv := reflect.ValueOf(*a), reflect.ValueOf(*b)
	t := av.Type()
	var out []string
	for i := range t.NumField() {
		if !reflect.DeepEqual(av.Field(i).Interface(), bv.Field(i).Interface()) {
			name, _, _ := strings.Cut(t.Field(i).Tag.Get("json"), ",")
			out = append(out, name)
		}
	}
	return out
}

func describe(d cairnv1.DatabaseRef) string {
	return fmt.Sprintf("%s %s:%d/%s", d.Engine, d.Host, d.Port, d.Database)
}

// Describe names a database for messages: "postgres db.shop.svc:5432/orders".
func Describe(d cairnv1.DatabaseRef) string { return describe(d) }

// memoryLimit is the memory limit (MiB, 0: none) of the agent container of
// spec's step Jobs, and the field that sets it (nil: the agent's default).
// spec.resources replaces the agent's resources as a whole: with resources
// but no memory limit, the container has none.
func memoryLimit(spec *migrationv1.MigrationJobSpec, fldPath *field.Path) (int64, *field.Path) {
	r := spec.Resources
	if r == nil {
		return agentjob.DefaultMemoryLimitMiB, nil
	}
	p := fldPath.Child("resources", "limits", "memory")
	q, ok := r.Limits[corev1.ResourceMemory]
	if !ok || q.IsZero() {
		return 0, p
	}
	return q.Value() >> 20, p
}

// WritesStopped reports whether cutover may rely on no application writing
// to the source: cutover makes it read-only, or the user declared the
// writers stopped.
func WritesStopped(spec *migrationv1.MigrationJobSpec) bool {
	return spec.Cutover.SourceReadOnly || spec.Cutover.WritersStopped
}

// NeedsWritesStopped reports whether cutover must wait for writes to the
// source to stop: a Continuous cutover ends replication (a write after
// that would be lost), and a Full cutover that switches the Secret would
// leave a later write behind on the old database.
func NeedsWritesStopped(spec *migrationv1.MigrationJobSpec) bool {
	return spec.Mode == migrationv1.ModeContinuous || spec.Mode == migrationv1.ModeFull && spec.Cutover.SwitchSecret != nil
}

// Validate is every check of a MigrationJob named name in namespace ns
// with the (defaulted) spec: its name, its spec, and that the target is
// not the source. The webhook and the controller both call it.
func Validate(name, ns string, spec *migrationv1.MigrationJobSpec) field.ErrorList {
	errs := append(ValidateName(name), ValidateSpec(spec, field.NewPath("spec"))...)
	if ferr := SameDatabaseError(spec, ns, field.NewPath("spec")); ferr != nil {
		errs = append(errs, ferr)
	}
	return errs
}
