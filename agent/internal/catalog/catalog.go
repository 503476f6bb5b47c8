// Package catalog is the per-BackupJob index of successful backups kept in
// the store next to the artifacts.
//
// Each artifact has its own manifest (<namespace>/<name>/entries/<artifact>.json,
// see Manifest for why), written once by the run that wrote the artifact,
// after the store confirmed every byte, and deleted before the artifact is.
// The index is the set of manifests whose artifact is present (Index),
// merged with the legacy catalog.json that agents before manifests wrote
// (Catalog, Decode): it is read, never written, so an upgraded store keeps
// its history. A fresh cluster needs nothing but the store's coordinates and
// the BackupJob key to list and restore.
//
// The functions here are pure: reading and writing the store is the caller's.
package catalog

import (
	"bytes"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"time"

	"cairn.dev/agent/contract"
	"cairn.dev/agent/internal/crypt"
	"cairn.dev/agent/internal/identity"
	"cairn.dev/agent/internal/inventory"
	"cairn.dev/agent/internal/naming"
)

// Kind and Version identify the format.
const (
	Kind    = "CairnBackupCatalog"
	Version = 1
)

// Entry describes one successful backup.
type Entry struct {
	// Name is the artifact file name, relative to the job's directory.
	Name string `json:"name"`
	// Size in bytes and Checksum ("sha256:<hex>") of the stored bytes.
	Size     int64     `json:"size"`
	Checksum string    `json:"checksum"`
	Start    time.Time `json:"start"`
	End      time.Time `json:"end"`
	// DurationSeconds is End-Start.
	DurationSeconds float64 `json:"durationSeconds"`
	// Engine is postgres or mysql.
	Engine string `json:"engine"`
	// Server is the source server as it reported itself when the backup
	// started (package toolset); absent in entries written before.
	Server *contract.ServerInfo `json:"server,omitempty"`
	// Format names the dump format ("pg_dump-custom", "mysqldump-sql") and
	// Compression the stream compression ("zstd").
	Format      string `json:"format"`
	Compression string `json:"compression"`
	// AgentVersion is the version of the agent that wrote the artifact.
	AgentVersion string `json:"agentVersion,omitempty"`
	// Inventory lists the dumped tables with row counts (and checksums),
	// taken in the dump's own snapshot where the engine allows it
	// (Inventory.Consistent). Absent in manifests of older agents, of
	// backups taken with CAIRN_INVENTORY=None, and in the legacy catalog.
	Inventory *inventory.Inventory `json:"inventory,omitempty"`
	// Source is the identity of the database the artifact was taken of, as
	// its server reported it (system_identifier and database oid; server
	// uuid or hostname, port and datadir, and schema): a restore or import
	// refuses to write into it unless told to (allowOverwriteSource).
	// Absent in manifests of older agents and when it could not be read.
	Source *identity.ID `json:"source,omitempty"`
	// BinlogBase is where the dump's snapshot stands in the source's binary
	// log (MySQL/MariaDB, CAIRN_POINT_IN_TIME): the artifact is a base for
	// point-in-time recovery from there. Absent otherwise.
	BinlogBase *BinlogBase `json:"binlogBase,omitempty"`
	// WALBase is where a PostgreSQL physical base (a name ending in
	// naming.ExtPostgresBase) starts in the source's write-ahead log
	// (CAIRN_POINT_IN_TIME): recovery replays the archived WAL from there.
	// Absent otherwise.
	WALBase *WALBase `json:"walBase,omitempty"`
	// Encryption says the artifact is age-encrypted (after compression) and
	// to which recipients, by public key and fingerprint; never a private
	// key. Absent for an artifact that is not encrypted. Size and Checksum
	// are of the encrypted, stored bytes.
	Encryption *crypt.Encryption `json:"encryption,omitempty"`
	// Parts is the number of parts of a multi-part artifact (a name ending
	// in naming.ExtMySQLParts, or that and ExtEncrypted) and PartsSize their
	// stored bytes; Size and Checksum are then those of its parts index, the
	// object under Name, which records each part's size and checksum
	// (internal/parts). Absent for a single-file artifact.
	Parts     int   `json:"parts,omitempty"`
	PartsSize int64 `json:"partsSize,omitempty"`
}

// EncryptedTo returns the fingerprints of the recipients e is encrypted
// to, or nil.
func (e Entry) EncryptedTo() []string {
	if e.Encryption == nil {
		return nil
	}
	return e.Encryption.Fingerprints()
}

// Catalog is the index of one BackupJob's artifacts, oldest first.
type Catalog struct {
	Kind      string    `json:"kind"`
	Version   int       `json:"version"`
	BackupJob string    `json:"backupJob"`
	UpdatedAt time.Time `json:"updatedAt"`
	Entries   []Entry   `json:"entries"`
}

// New returns an empty catalog for job.
func New(job naming.Job) *Catalog {
	return &Catalog{Kind: Kind, Version: Version, BackupJob: job.String(), Entries: []Entry{}}
}

// Decode parses a stored catalog and checks that it belongs to job.
func Decode(data []byte, job naming.Job) (*Catalog, error) {
	dec := json.NewDecoder(bytes.NewReader(data))
	var c Catalog
	if err := dec.Decode(&c); err != nil {
		return nil, fmt.Errorf("catalog of %s is not valid JSON: %w", job, err)
	}
	if c.Kind != Kind {
		return nil, fmt.Errorf("catalog of %s: kind %q, want %q", job, c.Kind, Kind)
	}
	if c.Version != Version {
		return nil, fmt.Errorf("catalog of %s: version %d is not supported (this agent reads version %d)", job, c.Version, Version)
	}
	if c.BackupJob != job.String() {
		return nil, fmt.Errorf("catalog belongs to backup job %q, not %s", c.BackupJob, job)
	}
	for _, e := range c.Entries {
		if err := validEntry(job, e); err != nil {
			return nil, fmt.Errorf("catalog of %s: %w", job, err)
		}
	}
	if c.Entries == nil {
		c.Entries = []Entry{}
	}
	sortEntries(c.Entries)
	return &c, nil
}

// Encode returns the catalog as indented JSON.
func (c *Catalog) Encode() []byte {
	b, err := json.MarshalIndent(c, "", "  ")
	if err != nil {
		// Only plain data: cannot fail.
		panic(err)
	}
	return append(b, '\n')
}

// With returns a copy of c with e added, or replacing the entry of the same
// name, stamped at now. c itself is not modified.
func (c *Catalog) With(e Entry, now time.Time) (*Catalog, error) {
	job, err := naming.ParseJob(c.BackupJob)
	if err != nil {
		return nil, err
	}
	if err := validEntry(job, e); err != nil {
		return nil, err
	}
	out := c.clone()
	out.Entries = slices.DeleteFunc(out.Entries, func(x Entry) bool { return x.Name == e.Name })
	out.Entries = append(out.Entries, e)
	sortEntries(out.Entries)
	out.UpdatedAt = now.UTC()
	return out, nil
}

// Without returns a copy of c without the named entries, stamped at now.
func (c *Catalog) Without(names []string, now time.Time) *Catalog {
	out := c.clone()
	out.Entries = slices.DeleteFunc(out.Entries, func(x Entry) bool { return slices.Contains(names, x.Name) })
	out.UpdatedAt = now.UTC()
	return out
}

// Newest returns the newest entry.
func (c *Catalog) Newest() (Entry, bool) {
	if len(c.Entries) == 0 {
		return Entry{}, false
	}
	return c.Entries[len(c.Entries)-1], true
}

// Find returns the entry whose name is ref, or whose name is ref's last path
// element (so a full store path as reported by the agent also works).
func (c *Catalog) Find(ref string) (Entry, bool) {
	if i := strings.LastIndex(ref, "/"); i >= 0 {
		ref = ref[i+1:]
	}
	for _, e := range c.Entries {
		if e.Name == ref {
			return e, true
		}
	}
	return Entry{}, false
}

func (c *Catalog) clone() *Catalog {
	out := *c
	out.Entries = slices.Clone(c.Entries)
	if out.Entries == nil {
		out.Entries = []Entry{}
	}
	return &out
}

func validEntry(job naming.Job, e Entry) error {
	start, engine, err := naming.ParseArtifactName(job, e.Name)
	if err != nil {
		return err
	}
	if e.Engine != engine {
		return fmt.Errorf("entry %s: engine %q does not match its name", e.Name, e.Engine)
	}
	if !start.Equal(e.Start.UTC().Truncate(time.Millisecond)) {
		return fmt.Errorf("entry %s: start %s does not match its name", e.Name, e.Start.UTC().Format(time.RFC3339Nano))
	}
	if !strings.HasPrefix(e.Checksum, "sha256:") || len(e.Checksum) != len("sha256:")+64 {
		return fmt.Errorf("entry %s: checksum %q is not sha256:<64 hex>", e.Name, e.Checksum)
	}
	if e.Size < 0 {
		return fmt.Errorf("entry %s: negative size", e.Name)
	}
	if naming.PhysicalBase(e.Name) != (e.WALBase != nil) {
		return fmt.Errorf("entry %s: its name and its WAL base record disagree on whether it is a physical base", e.Name)
	}
	if naming.Multipart(e.Name) != (e.Parts > 0) {
		return fmt.Errorf("entry %s: its name and its parts count (%d) disagree on whether it is a multi-part artifact", e.Name, e.Parts)
	}
	switch enc := e.Encryption; {
	case naming.Encrypted(e.Name) != (enc != nil):
		return fmt.Errorf("entry %s: its name and its encryption record disagree on whether it is encrypted", e.Name)
	case enc != nil && (enc.Method != crypt.Method || len(enc.Recipients) == 0):
		return fmt.Errorf("entry %s: encryption %q with %d recipient(s): want %q with at least one", e.Name, enc.Method, len(enc.Recipients), crypt.Method)
	}
	return nil
}

// Names are fixed-width and share the job prefix, so name order is time order.
func sortEntries(es []Entry) {
	slices.SortFunc(es, func(a, b Entry) int { return strings.Compare(a.Name, b.Name) })
}

// WALBase is the start of a PostgreSQL base backup in the write-ahead log,
// as its backup_label says.
type WALBase struct {
	// File is the WAL segment the backup starts in (its checkpoint's redo).
	File string `json:"file"`
	// StartLSN ("0/2000028"), Timeline and StartTime of the backup.
	StartLSN  string    `json:"startLSN"`
	Timeline  int       `json:"timeline"`
	StartTime time.Time `json:"startTime,omitzero"`
	// User is the role that took it (it exists in the recovered cluster:
	// the restore connects to its temporary server as that role first).
	User string `json:"user,omitempty"`
	// Database is the database the backup was configured for: the one a
	// restore takes out of the recovered cluster.
	Database string `json:"database"`
}

// BinlogBase is a position in a MySQL/MariaDB binary log.
type BinlogBase struct {
	File string `json:"file"`
	Pos  int64  `json:"pos"`
}
