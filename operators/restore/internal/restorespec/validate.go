package restorespec

import (
	"fmt"
	"net"
	"net/url"
	"path"
	"strings"
	"unicode"

	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"

	cairnv1 "cairn.dev/apis/meta/v1"
	restorev1 "cairn.dev/apis/restore/v1"
)

// MaxNameLength is the longest RestoreJob name: its Job is named
// <name>-restore, and a Job name is at most 63 characters.
const MaxNameLength = 63 - len("-restore")

// MaxArtifactLength is the longest artifact reference.
const MaxArtifactLength = 1024

// ValidateName checks a RestoreJob's metadata.name.
func ValidateName(name string) field.ErrorList {
	if len(name) > MaxNameLength {
		return field.ErrorList{field.TooLong(field.NewPath("metadata", "name"), name, MaxNameLength)}
	}
	return nil
}

// ValidateSpec checks a (defaulted) RestoreJob spec; fldPath is the path of
// the spec. Every message names the field and says how to fix it.
func ValidateSpec(spec *restorev1.RestoreJobSpec, fldPath *field.Path) field.ErrorList {
	var errs field.ErrorList
	errs = append(errs, validateSource(&spec.Source, fldPath.Child("source"))...)
	errs = append(errs, validateTarget(&spec.Target, fldPath.Child("target"))...)
	if r := spec.MaxRetries; r != nil && (*r < 0 || *r > 20) {
		errs = append(errs, field.Invalid(fldPath.Child("maxRetries"), *r,
			fmt.Sprintf("must be between 0 and 20; omit it for the default, %d", DefaultMaxRetries)))
	}
	if d := spec.ActiveDeadlineSeconds; d != nil && (*d < 60 || *d > 604800) {
		errs = append(errs, field.Invalid(fldPath.Child("activeDeadlineSeconds"), *d,
			fmt.Sprintf("must be between 60 (one minute) and 604800 (7 days) seconds; omit it for the default, %d", DefaultActiveDeadlineSeconds)))
	}
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
		errs = append(errs, validateObjectName(bj.Name, bp.Child("name"), "a BackupJob in the RestoreJob's namespace")...)
		if bj.Artifact != "" {
			errs = append(errs, validateArtifact(bj.Artifact, bp.Child("artifact"))...)
		}
	}
	if st := src.Store; st != nil {
		sp := p.Child("store")
		errs = append(errs, validateStorage(&st.Storage, sp.Child("storage"))...)
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
	for _, m := range validation.IsDNS1123Label(ns) {
		msgs = append(msgs, "namespace: "+m)
	}
	for _, m := range validation.IsDNS1123Subdomain(name) {
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

func validateTarget(db *cairnv1.DatabaseRef, p *field.Path) field.ErrorList {
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
	switch {
	case db.Database == "":
		errs = append(errs, field.Required(p.Child("database"), "set the name of the database to restore into (created if it does not exist)"))
	case len(db.Database) > 128:
		errs = append(errs, field.TooLong(p.Child("database"), db.Database, 128))
	}
	errs = append(errs, validateObjectName(db.CredentialsSecretRef.Name, p.Child("credentialsSecretRef", "name"),
		"a Secret in the RestoreJob's namespace with the keys username and password")...)
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
			hint = "; set the port in spec.target.port, not in the host"
		}
		return field.ErrorList{field.Invalid(p, host,
			fmt.Sprintf("must be a DNS name or an IP address, e.g. \"postgres.shop.svc\" (%s)%s", strings.Join(msgs, "; "), hint))}
	}
	return nil
}

// validateObjectName checks the name of a namespaced object: a DNS-1123 subdomain.
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
			"a PersistentVolumeClaim in the RestoreJob's namespace")...)
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
				"must be a bucket name without \"/\"; put a path inside the bucket in prefix"))
		case len(s3.Bucket) < 3 || len(s3.Bucket) > 63:
			errs = append(errs, field.Invalid(sp.Child("bucket"), s3.Bucket, "must be 3 to 63 characters long"))
		}
		errs = append(errs, validateObjectName(s3.CredentialsSecretRef.Name, sp.Child("credentialsSecretRef", "name"),
			"a Secret in the RestoreJob's namespace with the keys accessKeyID and secretAccessKey")...)
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
