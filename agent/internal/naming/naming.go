// Package naming turns a BackupJob key and a time into store paths.
//
// Layout inside a store (PVC mount path, or bucket + prefix):
//
//	<namespace>/<name>/<namespace>_<name>_<YYYYMMDDTHHMMSS.mmmZ>-<token><ext>   artifact
//	<namespace>/<name>/entries/<artifact>.json    its manifest: written once the artifact is complete
//	<namespace>/<name>/running/<artifact>.json    in-progress marker of the run writing it
//	<namespace>/<name>/catalog.json               legacy index (agents before manifests); read, never written
//
// The artifact's file name repeats the BackupJob key, so a copied file still
// says where it came from; "_" cannot occur in Kubernetes names, so it
// separates the parts unambiguously. The timestamp is the backup's UTC start
// time with fixed width, so names sort lexically in time order. The token
// (8 random hex digits) makes two runs that start in the same millisecond —
// a run-now beside a scheduled run, two clusters sharing a bucket — write
// different objects; names without a token (older agents) remain valid.
package naming

import (
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"path"
	"regexp"
	"strings"
	"time"
)

// CatalogFile is the name of the legacy per-BackupJob index.
const CatalogFile = "catalog.json"

// Sub-directories of a job's directory: manifests of complete artifacts and
// markers of runs in progress.
const (
	EntriesDir = "entries"
	RunningDir = "running"
	// VerifiedDir holds one record per artifact that a ProtectionPlan's
	// verification restored with every check passed: in the store, so it
	// survives a lost cluster (retention's minVerified reads it).
	VerifiedDir = "verified"
)

// TokenLen is the length of an artifact name's random token (hex digits).
const TokenLen = 8

// TimeLayout is the artifact timestamp format (UTC, millisecond precision,
// fixed width so that lexical order is time order).
const TimeLayout = "20060102T150405.000Z"

// Extensions by engine: the dump format, then the compression.
const (
	ExtPostgres = ".pgdump.zst" // pg_dump custom format, zstd-compressed
	ExtMySQL    = ".sql.zst"    // mysqldump SQL text, zstd-compressed
	// ExtPostgresBase is a physical base backup of a PostgreSQL cluster
	// (pg_basebackup, tar format, zstd-compressed): a base for
	// point-in-time recovery.
	ExtPostgresBase = ".pgbase.tar.zst"
	// ExtEncrypted follows the engine's extension on an artifact encrypted
	// with age after compression: "….pgdump.zst.age".
	ExtEncrypted = ".age"
	// ExtMySQLParts names a multi-part artifact (internal/parts): the object
	// under the name is the parts index (JSON, never encrypted), the parts
	// are under "<name>.d/", each compressed (and, for "….sql.parts.age",
	// encrypted) on its own.
	ExtMySQLParts = ".sql.parts"
	// ExtPostgresParts names a PostgreSQL multi-part artifact: pg_dump
	// custom-format archives (the schema before and after the data, and
	// the data of each large table and of everything else), each
	// compressed and checksummed on its own, under "<name>.d/".
	ExtPostgresParts = ".pgdump.parts"
	// PartsDirSuffix follows a multi-part artifact's name to name the
	// directory of its parts.
	PartsDirSuffix = ".d"
)

// Multipart reports whether an artifact name is a multi-part artifact's.
func Multipart(name string) bool {
	n := strings.TrimSuffix(name, ExtEncrypted)
	return strings.HasSuffix(n, ExtMySQLParts) || strings.HasSuffix(n, ExtPostgresParts)
}

// ToParts turns a single-file artifact name (before ExtEncrypted) into the
// name of the multi-part artifact of the same engine, start and token.
func ToParts(name string) (string, error) {
	if base, ok := strings.CutSuffix(name, ExtMySQL); ok {
		return base + ExtMySQLParts, nil
	}
	if base, ok := strings.CutSuffix(name, ExtPostgres); ok {
		return base + ExtPostgresParts, nil
	}
	return "", fmt.Errorf("artifact %q: only logical MySQL and PostgreSQL backups are written in parts", name)
}

// PartExtension is the file name extension of a multi-part artifact's
// parts (before ExtEncrypted): the engine's single-file extension.
func PartExtension(name string) string {
	if strings.HasSuffix(strings.TrimSuffix(name, ExtEncrypted), ExtPostgresParts) {
		return ExtPostgres
	}
	return ExtMySQL
}

// ToBase turns a PostgreSQL artifact name (before ExtEncrypted) into the
// name of a physical base of the same start and token.
func ToBase(name string) (string, error) {
	base, ok := strings.CutSuffix(name, ExtPostgres)
	if !ok {
		return "", fmt.Errorf("artifact %q: only PostgreSQL backups are physical bases", name)
	}
	return base + ExtPostgresBase, nil
}

// PhysicalBase reports whether an artifact name is a PostgreSQL physical
// base's.
func PhysicalBase(name string) bool {
	return strings.HasSuffix(strings.TrimSuffix(name, ExtEncrypted), ExtPostgresBase)
}

// PartsDir is the directory (store key) of a multi-part artifact's parts.
func (j Job) PartsDir(artifactName string) string { return j.Key(artifactName) + PartsDirSuffix }

// PartKey is the store key of one part of a multi-part artifact.
func (j Job) PartKey(artifactName, part string) string {
	return path.Join(j.PartsDir(artifactName), part)
}

// PartOf returns the multi-part artifact a key is a part of (or a PVC
// temporary file of a part).
func (j Job) PartOf(key string) (string, bool) {
	dir := path.Dir(key)
	name, ok := strings.CutSuffix(path.Base(dir), PartsDirSuffix)
	if !ok || path.Dir(dir) != j.Dir() || !Multipart(name) {
		return "", false
	}
	return name, true
}

// Encrypted reports whether an artifact name says the artifact is
// age-encrypted (it ends in ExtEncrypted).
func Encrypted(name string) bool { return strings.HasSuffix(name, ExtEncrypted) }

var (
	dns1123Label     = regexp.MustCompile(`^[a-z0-9]([-a-z0-9]*[a-z0-9])?$`)
	dns1123Subdomain = regexp.MustCompile(`^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$`)
)

// Job identifies a BackupJob, or a MigrationJob's exports: the catalog key.
type Job struct {
	// Space is the key space: "" for a BackupJob, MigrationSpace for a
	// MigrationJob's exports.
	Space     string
	Namespace string
	Name      string
}

// MigrationSpace is the directory (relative to the store root) under which
// MigrationJobs keep their exports: <MigrationSpace>/<namespace>/<name>/.
// A BackupJob's directory is <namespace>/<name>/ and a namespace cannot
// contain '_', so no BackupJob in the same store lists, restores, prunes or
// deletes a migration's export, whatever the two are named.
const MigrationSpace = "_migrations"

// BinlogSpace is the directory under which BackupJobs keep their archived
// binary logs (point-in-time recovery): <BinlogSpace>/<namespace>/<name>/,
// apart from the artifacts, so no listing, prune or delete of artifacts
// reads or removes a segment.
const BinlogSpace = "_binlog"

// BinlogDir is the job's binary log archive, relative to the store root.
func (j Job) BinlogDir() string { return path.Join(BinlogSpace, j.Namespace, j.Name) }

// WALSpace is the directory under which BackupJobs of PostgreSQL keep their
// archived write-ahead log (point-in-time recovery):
// <WALSpace>/<namespace>/<name>/, apart from the artifacts as BinlogSpace.
const WALSpace = "_wal"

// WALDir is the job's WAL archive, relative to the store root.
func (j Job) WALDir() string { return path.Join(WALSpace, j.Namespace, j.Name) }

// LogDir is the job's change-log archive of engine: the WAL archive for
// postgres, the binary log archive otherwise.
func (j Job) LogDir(engine string) string {
	if engine == "postgres" {
		return j.WALDir()
	}
	return j.BinlogDir()
}

// MigrationJob is the store key of a MigrationJob's exports.
func MigrationJob(namespace, name string) Job {
	return Job{Space: MigrationSpace, Namespace: namespace, Name: name}
}

// ParseJob parses "namespace/name". Both parts must be valid Kubernetes
// names, which also keeps them safe as path segments.
func ParseJob(s string) (Job, error) {
	ns, name, ok := strings.Cut(s, "/")
	if !ok || ns == "" || name == "" || strings.Contains(name, "/") {
		return Job{}, fmt.Errorf("backup job %q: want namespace/name", s)
	}
	if len(ns) > 63 || !dns1123Label.MatchString(ns) {
		return Job{}, fmt.Errorf("backup job %q: namespace %q is not a valid Kubernetes namespace", s, ns)
	}
	if len(name) > 253 || !dns1123Subdomain.MatchString(name) {
		return Job{}, fmt.Errorf("backup job %q: name %q is not a valid Kubernetes object name", s, name)
	}
	return Job{Namespace: ns, Name: name}, nil
}

func (j Job) String() string { return j.Namespace + "/" + j.Name }

// Dir is the job's directory, relative to the store root.
func (j Job) Dir() string { return path.Join(j.Space, j.Namespace, j.Name) }

// EntriesPrefix is the directory of the job's manifests.
func (j Job) EntriesPrefix() string { return path.Join(j.Dir(), EntriesDir) }

// RunningPrefix is the directory of the job's in-progress markers.
func (j Job) RunningPrefix() string { return path.Join(j.Dir(), RunningDir) }

// ManifestKey is the store key of an artifact's manifest.
func (j Job) ManifestKey(artifactName string) string {
	return path.Join(j.EntriesPrefix(), artifactName+".json")
}

// MarkerKey is the store key of the in-progress marker of the run writing
// an artifact.
func (j Job) MarkerKey(artifactName string) string {
	return path.Join(j.RunningPrefix(), artifactName+".json")
}

// VerifiedPrefix is the directory of the job's verification records.
func (j Job) VerifiedPrefix() string { return path.Join(j.Dir(), VerifiedDir) }

// VerifiedKey is the store key of an artifact's verification record.
func (j Job) VerifiedKey(artifactName string) string {
	return path.Join(j.VerifiedPrefix(), artifactName+".json")
}

// CatalogKey is the store key of the job's legacy catalog.
func (j Job) CatalogKey() string { return path.Join(j.Dir(), CatalogFile) }

// Key is the store key of an artifact file name of this job.
func (j Job) Key(artifactName string) string { return path.Join(j.Dir(), artifactName) }

// Extension returns the artifact extension for an engine.
func Extension(engine string) (string, error) {
	switch engine {
	case "postgres":
		return ExtPostgres, nil
	case "mysql":
		return ExtMySQL, nil
	}
	return "", fmt.Errorf("unknown engine %q (want postgres or mysql)", engine)
}

// ArtifactName is the token-less file name of the job's backup started at t,
// as agents before manifests wrote it.
func ArtifactName(j Job, engine string, t time.Time) (string, error) {
	return ArtifactNameToken(j, engine, t, "")
}

// ArtifactNameToken is the file name of the job's backup started at t, made
// unique by token (TokenLen lowercase hex digits; empty for none).
func ArtifactNameToken(j Job, engine string, t time.Time, token string) (string, error) {
	ext, err := Extension(engine)
	if err != nil {
		return "", err
	}
	stamp := t.UTC().Format(TimeLayout)
	if token != "" {
		if !validToken(token) {
			return "", fmt.Errorf("artifact token %q: want %d lowercase hex digits", token, TokenLen)
		}
		stamp += "-" + token
	}
	return j.Namespace + "_" + j.Name + "_" + stamp + ext, nil
}

// NewToken returns a random artifact token.
func NewToken() string {
	var b [TokenLen / 2]byte
	if _, err := rand.Read(b[:]); err != nil {
		panic(err) // crypto/rand does not fail on supported platforms
	}
	return hex.EncodeToString(b[:])
}

func validToken(s string) bool {
	if len(s) != TokenLen {
		return false
	}
	for _, c := range s {
		if !('0' <= c && c <= '9' || 'a' <= c && c <= 'f') {
			return false
		}
	}
	return true
}

// ParseArtifactName checks that name is an artifact file name of job j and
// returns its start time and engine.
func ParseArtifactName(j Job, name string) (time.Time, string, error) {
	prefix := j.Namespace + "_" + j.Name + "_"
	rest, ok := strings.CutPrefix(name, prefix)
	if !ok {
		return time.Time{}, "", fmt.Errorf("artifact %q does not belong to backup job %s", name, j)
	}
	rest = strings.TrimSuffix(rest, ExtEncrypted)
	var engine, stamp string
	switch {
	case strings.HasSuffix(rest, ExtPostgres):
		engine, stamp = "postgres", strings.TrimSuffix(rest, ExtPostgres)
	case strings.HasSuffix(rest, ExtPostgresBase):
		engine, stamp = "postgres", strings.TrimSuffix(rest, ExtPostgresBase)
	case strings.HasSuffix(rest, ExtMySQL):
		engine, stamp = "mysql", strings.TrimSuffix(rest, ExtMySQL)
	case strings.HasSuffix(rest, ExtMySQLParts):
		engine, stamp = "mysql", strings.TrimSuffix(rest, ExtMySQLParts)
	case strings.HasSuffix(rest, ExtPostgresParts):
		engine, stamp = "postgres", strings.TrimSuffix(rest, ExtPostgresParts)
	default:
		return time.Time{}, "", fmt.Errorf("artifact %q: unknown extension", name)
	}
	if len(stamp) == len(TimeLayout)+1+TokenLen && stamp[len(TimeLayout)] == '-' {
		if !validToken(stamp[len(TimeLayout)+1:]) {
			return time.Time{}, "", fmt.Errorf("artifact %q: bad token %q", name, stamp[len(TimeLayout)+1:])
		}
		stamp = stamp[:len(TimeLayout)]
	}
	t, err := time.Parse(TimeLayout, stamp)
	if err != nil {
		return time.Time{}, "", fmt.Errorf("artifact %q: bad timestamp %q", name, stamp)
	}
	return t, engine, nil
}
