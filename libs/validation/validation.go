// Package validation checks the parts every Cairn kind shares — a database
// reference and a storage location — and returns field errors that name the
// field and the fix. Webhooks and controllers of every operator use it, so a
// bad host or bucket gets the same message whichever kind carries it.
//
// Every value checked here ends up on a command line, in a connection
// string, an S3 key or a path inside the agent's pod. The rules refuse
// what a tool could read as anything but data (a leading "-", "=", a
// scheme, separators, control characters); the agent passes values as data
// anyway (see agent/README.md), so these rules are the first of two walls.
// The CRD schemas carry the same patterns as CEL rules, so an install
// without webhooks refuses these values too.
package validation

import (
	"fmt"
	"net"
	"net/url"
	"path"
	"regexp"
	"strings"
	"unicode"

	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"

	cairnv1 "cairn.dev/apis/meta/v1"
	"cairn.dev/libs/agentjob"
)

// Default ports by engine.
const (
	DefaultPostgresPort int32 = 5432
	DefaultMySQLPort    int32 = 3306
)

// Database checks a database reference at p; kind names the object that holds
// it (e.g. "BackupJob"), for messages about objects in its namespace.
func Database(db *cairnv1.DatabaseRef, p *field.Path, kind string) field.ErrorList {
	var errs field.ErrorList
	switch db.Engine {
	case cairnv1.PostgresEngine, cairnv1.MySQLEngine:
	case "":
		errs = append(errs, field.Required(p.Child("engine"), "set the database engine: postgres (PostgreSQL) or mysql (MySQL, MariaDB)"))
	default:
		errs = append(errs, field.NotSupported(p.Child("engine"), db.Engine,
			[]cairnv1.DatabaseEngine{cairnv1.PostgresEngine, cairnv1.MySQLEngine}))
	}
	errs = append(errs, host(db.Host, p.Child("host"), p.Child("port"))...)
	if db.Port < 0 || db.Port > 65535 {
		errs = append(errs, field.Invalid(p.Child("port"), db.Port,
			fmt.Sprintf("must be between 1 and 65535; omit it for the engine's default (%d for postgres, %d for mysql)", DefaultPostgresPort, DefaultMySQLPort)))
	}
	errs = append(errs, DatabaseName(db.Engine, db.Database, p.Child("database"))...)
	errs = append(errs, ObjectName(db.CredentialsSecretRef.Name, p.Child("credentialsSecretRef", "name"),
		"a Secret in the "+kind+"'s namespace with the keys username and password")...)
	return errs
}

// Longest database names: PostgreSQL's NAMEDATALEN-1 bytes, MySQL's 64
// characters (names are ASCII here, so bytes and characters agree).
const (
	MaxPostgresDatabaseName = 63
	MaxMySQLDatabaseName    = 64
)

// DatabaseNamePattern is what a database name may look like: letters,
// digits and "_ $ . -", starting with a letter, digit or "_". It is wider
// than an unquoted SQL identifier (the agent quotes every name) and narrow
// enough that no tool reads a name as anything but a name: no leading "-"
// (an option), no "=" or "://" (a libpq connection string), no spaces,
// quotes, slashes, backslashes or control characters. The CRD schema
// carries the same pattern as a CEL rule.
const DatabaseNamePattern = `^[A-Za-z0-9_][A-Za-z0-9_$.-]*$`

var databaseName = regexp.MustCompile(DatabaseNamePattern)

// DatabaseName checks the name of a database of engine at p. An unknown
// engine gets the longer limit (the engine is reported on its own).
func DatabaseName(engine cairnv1.DatabaseEngine, name string, p *field.Path) field.ErrorList {
	if name == "" {
		return field.ErrorList{field.Required(p, "set the name of the database")}
	}
	limit := MaxMySQLDatabaseName
	if engine == cairnv1.PostgresEngine {
		limit = MaxPostgresDatabaseName
	}
	var why string
	switch {
	case len(name) > limit:
		why = fmt.Sprintf("must be at most %d characters for %s", limit, engineOr(engine))
	case strings.HasPrefix(name, "-"):
		why = `must not start with "-": a database tool would read it as an option`
	case strings.Contains(name, "="):
		why = `must not contain "=": libpq would read it as a connection string`
	case strings.IndexFunc(name, unicode.IsControl) >= 0:
		why = "must not contain control characters"
	case !databaseName.MatchString(name):
		why = `use letters, digits and "_ $ . -", starting with a letter, digit or "_" (no spaces, quotes, slashes or other punctuation)`
	default:
		return nil
	}
	return field.ErrorList{field.Invalid(p, name, why)}
}

func engineOr(e cairnv1.DatabaseEngine) string {
	if e == "" {
		return "this engine"
	}
	return string(e)
}

func host(h string, p, portPath *field.Path) field.ErrorList {
	switch {
	case h == "":
		return field.ErrorList{field.Required(p, `set the host name or address of the database server, e.g. "postgres.shop.svc"`)}
	case strings.Contains(h, "://"):
		return field.ErrorList{field.Invalid(p, h, `must be a host name or address without a scheme, e.g. "postgres.shop.svc"`)}
	case net.ParseIP(h) != nil:
		return nil
	}
	if msgs := validation.IsDNS1123Subdomain(strings.ToLower(h)); len(msgs) > 0 {
		hint := ""
		if strings.Contains(h, ":") {
			hint = "; set the port in " + portPath.String() + ", not in the host"
		}
		return field.ErrorList{field.Invalid(p, h,
			fmt.Sprintf("must be a DNS name or an IP address, e.g. \"postgres.shop.svc\" (%s)%s", strings.Join(msgs, "; "), hint))}
	}
	return nil
}

// ObjectName checks the name of a namespaced object (Secret,
// PersistentVolumeClaim, ...): a DNS-1123 subdomain. what describes it.
func ObjectName(name string, p *field.Path, what string) field.ErrorList {
	if name == "" {
		return field.ErrorList{field.Required(p, "set the name of "+what)}
	}
	if msgs := validation.IsDNS1123Subdomain(name); len(msgs) > 0 {
		return field.ErrorList{field.Invalid(p, name,
			fmt.Sprintf("must be the name of %s, a DNS-1123 subdomain: %s", what, strings.Join(msgs, "; ")))}
	}
	return nil
}

// Storage checks a storage location at p: exactly one of pvc or s3, each
// complete, and an S3 part size that fits the agent's default memory limit.
func Storage(st *cairnv1.StorageSpec, p *field.Path, kind string) field.ErrorList {
	return StorageWithin(st, p, kind, agentjob.DefaultMemoryLimitMiB, nil)
}

// StorageWithin is Storage for an agent whose memory limit is limitMiB,
// set at limitPath (nil: the agent's default limit; limitMiB 0: no limit).
func StorageWithin(st *cairnv1.StorageSpec, p *field.Path, kind string, limitMiB int64, limitPath *field.Path) field.ErrorList {
	var errs field.ErrorList
	switch {
	case st.PVC != nil && st.S3 != nil:
		errs = append(errs, field.Forbidden(p, "set exactly one of pvc or s3, not both: remove one of them"))
	case st.PVC == nil && st.S3 == nil:
		errs = append(errs, field.Required(p, "set exactly one of pvc (a PersistentVolumeClaim) or s3 (an S3-compatible bucket)"))
	}
	if pvc := st.PVC; pvc != nil {
		pp := p.Child("pvc")
		errs = append(errs, ObjectName(pvc.ClaimName, pp.Child("claimName"),
			"a PersistentVolumeClaim in the "+kind+"'s namespace")...)
		if sp := pvc.SubPath; sp != "" && (path.IsAbs(sp) || hasDotDot(sp)) {
			errs = append(errs, field.Invalid(pp.Child("subPath"), sp, `must be a relative path without "..", e.g. "shop/orders"`))
		} else if strings.IndexFunc(sp, unicode.IsControl) >= 0 || strings.Contains(sp, `\`) {
			errs = append(errs, field.Invalid(pp.Child("subPath"), sp, "must not contain control characters or backslashes"))
		} else if reservedSegment(sp) {
			errs = append(errs, field.Invalid(pp.Child("subPath"), sp, reservedMessage))
		}
	}
	if s3 := st.S3; s3 != nil {
		sp := p.Child("s3")
		errs = append(errs, endpoint(s3.Endpoint, sp.Child("endpoint"))...)
		switch {
		case s3.Bucket == "":
			errs = append(errs, field.Required(sp.Child("bucket"), "set the bucket name"))
		case strings.Contains(s3.Bucket, "/"):
			errs = append(errs, field.Invalid(sp.Child("bucket"), s3.Bucket,
				"must be a bucket name without \"/\"; put a path inside the bucket in "+sp.Child("prefix").String()))
		case len(s3.Bucket) < 3 || len(s3.Bucket) > 63:
			errs = append(errs, field.Invalid(sp.Child("bucket"), s3.Bucket, "must be 3 to 63 characters long"))
		case !bucketName.MatchString(s3.Bucket):
			errs = append(errs, field.Invalid(sp.Child("bucket"), s3.Bucket,
				`must be a bucket name: letters, digits, ".", "-" and "_", starting and ending with a letter or digit`))
		}
		if s3.Prefix != "" && !validPrefix(s3.Prefix) {
			errs = append(errs, field.Invalid(sp.Child("prefix"), s3.Prefix,
				`must be a relative key prefix: segments of letters, digits, ".", "_" and "-" separated by "/" (no "." or ".." segment, no "//"), e.g. "prod/" or "cluster-a/backups"`))
		} else if reservedSegment(s3.Prefix) {
			errs = append(errs, field.Invalid(sp.Child("prefix"), s3.Prefix, reservedMessage))
		}
		if s3.Region != "" && !regionName.MatchString(s3.Region) {
			errs = append(errs, field.Invalid(sp.Child("region"), s3.Region, `must be a region name: lowercase letters, digits and "-", e.g. "eu-central-1"`))
		}
		errs = append(errs, ObjectName(s3.CredentialsSecretRef.Name, sp.Child("credentialsSecretRef", "name"),
			"a Secret in the "+kind+"'s namespace with the keys accessKeyID and secretAccessKey")...)
		errs = append(errs, partSize(s3, sp.Child("partSizeMiB"), limitMiB, limitPath)...)
	}
	return errs
}

// partSize: the agent holds one multipart part in memory, beside what it
// and its dump tool need (agentjob.MemoryOverheadMiB), all within the
// container's memory limit; a part that does not fit would get the agent
// killed for memory in the middle of every upload.
func partSize(s3 *cairnv1.S3Storage, p *field.Path, limitMiB int64, limitPath *field.Path) field.ErrorList {
	if limitMiB <= 0 {
		return nil
	}
	size, set := int64(DefaultPartSizeMiB), s3.PartSizeMiB != nil
	if set {
		size = int64(*s3.PartSizeMiB)
	}
	max := agentjob.MaxPartSizeMiB(limitMiB)
	if size <= max {
		return nil
	}
	budget := fmt.Sprintf("one part is held in memory beside %d MiB for the agent and its dump tool", agentjob.MemoryOverheadMiB)
	if limitPath == nil {
		return field.ErrorList{field.Invalid(p, size, fmt.Sprintf(
			"does not fit the agent's memory limit (%dMi): %s; use at most %d", limitMiB, budget, max))}
	}
	if !set {
		p = limitPath // the default part size: the limit is what is too small
	}
	fix := fmt.Sprintf("raise %s to at least %dMi", limitPath, size+agentjob.MemoryOverheadMiB)
	if max >= MinPartSizeMiB {
		fix = fmt.Sprintf("use a partSizeMiB of at most %d or %s", max, fix)
	}
	return field.ErrorList{field.Invalid(p, size, fmt.Sprintf(
		"a part of %d MiB does not fit the agent's memory limit (%s: %dMi): %s; %s", size, limitPath, limitMiB, budget, fix))}
}

// The S3 part size bounds (storage.s3.partSizeMiB) and the agent's default.
const (
	MinPartSizeMiB     = 5
	DefaultPartSizeMiB = 16
)

func endpoint(ep string, p *field.Path) field.ErrorList {
	if ep == "" {
		return field.ErrorList{field.Required(p, `set the S3 endpoint, host[:port] or an http(s) URL, e.g. "s3.eu-central-1.amazonaws.com" or "http://minio.storage.svc:9000"`)}
	}
	full := ep
	if !strings.Contains(full, "://") {
		full = "https://" + full
	}
	u, err := url.Parse(full)
	// url.Parse drops an empty query or fragment ("host?" or "host#"): refuse
	// those characters (and userinfo, spaces) in the string itself.
	if err != nil || strings.ContainsAny(ep, "?#@ ") || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || strings.Trim(u.Path, "/") != "" ||
		u.User != nil || u.RawQuery != "" || u.Fragment != "" || !endpointHost.MatchString(u.Host) {
		return field.ErrorList{field.Invalid(p, ep,
			`must be host[:port] or an http(s) URL without a path, e.g. "s3.eu-central-1.amazonaws.com" or "http://minio.storage.svc:9000"; put the bucket in bucket and a path in prefix`)}
	}
	return nil
}

// Patterns the CRD schema carries as CEL rules too.
const (
	BucketNamePattern = `^[A-Za-z0-9][A-Za-z0-9._-]*[A-Za-z0-9]$`
	PrefixPattern     = `^([A-Za-z0-9._-]+/)*[A-Za-z0-9._-]*$`
	RegionPattern     = `^[a-z0-9-]*$`
)

var (
	bucketName   = regexp.MustCompile(BucketNamePattern)
	prefix       = regexp.MustCompile(PrefixPattern)
	regionName   = regexp.MustCompile(RegionPattern)
	endpointHost = regexp.MustCompile(`^([A-Za-z0-9]([-A-Za-z0-9.]*[A-Za-z0-9])?|\[[0-9A-Fa-f:.]+\])(:[0-9]{1,5})?$`)
)

func validPrefix(p string) bool {
	if !prefix.MatchString(p) {
		return false
	}
	for _, seg := range strings.Split(strings.TrimSuffix(p, "/"), "/") {
		if seg == "." || seg == ".." {
			return false
		}
	}
	return true
}

// MigrationSpace is the directory of a store (relative to its root: the
// PVC's subPath, the bucket's prefix) that holds MigrationJobs' exports,
// <MigrationSpace>/<namespace>/<name>/ (the agent's naming.MigrationSpace).
// A storage location whose own path has it as a segment could reach those
// exports: a BackupJob with the prefix "_migrations" would list, restore,
// prune and delete a migration's export as its own backups. Every kind's
// storage is refused such a path.
const MigrationSpace = "_migrations"

const reservedMessage = `must not contain the path segment "` + MigrationSpace +
	`": it is reserved for MigrationJob exports, which a storage location under it could list, restore, prune or delete; choose another path, e.g. "migrations" or "backups/shop"`

// reservedSegment says whether the relative path p (a subPath or a key
// prefix) has MigrationSpace as one of its segments, once cleaned ("a/./_migrations/" included).
func reservedSegment(p string) bool {
	for _, seg := range strings.Split(path.Clean(p), "/") {
		if seg == MigrationSpace {
			return true
		}
	}
	return false
}

func hasDotDot(p string) bool {
	for _, part := range strings.Split(p, "/") {
		if part == ".." {
			return true
		}
	}
	return false
}
