package catalog

import (
	"bytes"
	"encoding/json"
	"fmt"
	"path"
	"strings"

	"cairn.dev/agent/internal/naming"
)

// ManifestKind identifies a per-artifact manifest.
const ManifestKind = "CairnBackupManifest"

// Manifest is the stored form of one entry: <job>/entries/<artifact>.json.
//
// Why one object per artifact rather than one rewritten catalog: every
// writer of the old catalog.json read it, changed it and wrote it back, so
// two runs at once (a run-now beside a scheduled run, two clusters sharing
// a bucket, a prune beside a backup) could each write an index without the
// other's change, and the lost entry's artifact was later swept as a
// leftover. A manifest is written once, by the one run that wrote its
// artifact (artifact names carry a random token), and deleted once, by a
// prune or delete: no object is ever read, modified and written back, so
// there is no update to lose, on S3 (no conditional writes needed, which
// not every S3-compatible server supports) or on a PVC (no lock file that a
// killed pod could leave held). The index is the set of manifests whose
// artifact is present; its size is bounded by retention, and no document
// grows with it.
type Manifest struct {
	Kind      string `json:"kind"`
	Version   int    `json:"version"`
	BackupJob string `json:"backupJob"`
	Entry
}

// EncodeManifest returns the manifest of e, an entry of job.
func EncodeManifest(job naming.Job, e Entry) ([]byte, error) {
	if err := validEntry(job, e); err != nil {
		return nil, err
	}
	b, err := json.MarshalIndent(Manifest{Kind: ManifestKind, Version: Version, BackupJob: job.String(), Entry: e}, "", "  ")
	if err != nil {
		return nil, err
	}
	return append(b, '\n'), nil
}

// DecodeManifest parses the manifest stored at key and checks that it
// describes an artifact of job named as its key says.
func DecodeManifest(data []byte, job naming.Job, key string) (Entry, error) {
	var m Manifest
	if err := json.NewDecoder(bytes.NewReader(data)).Decode(&m); err != nil {
		return Entry{}, fmt.Errorf("manifest %s is not valid JSON: %w", key, err)
	}
	switch {
	case m.Kind != ManifestKind:
		return Entry{}, fmt.Errorf("manifest %s: kind %q, want %q", key, m.Kind, ManifestKind)
	case m.Version != Version:
		return Entry{}, fmt.Errorf("manifest %s: version %d is not supported (this agent reads version %d)", key, m.Version, Version)
	case m.BackupJob != job.String():
		return Entry{}, fmt.Errorf("manifest %s belongs to backup job %q, not %s", key, m.BackupJob, job)
	}
	if name, ok := ManifestName(job, key); !ok || name != m.Name {
		return Entry{}, fmt.Errorf("manifest %s names artifact %q, not the one its key names", key, m.Name)
	}
	if err := validEntry(job, m.Entry); err != nil {
		return Entry{}, fmt.Errorf("manifest %s: %w", key, err)
	}
	return m.Entry, nil
}

// ManifestName returns the artifact name a manifest key stands for.
func ManifestName(job naming.Job, key string) (string, bool) {
	return underDir(job.EntriesPrefix(), key)
}

// VerifiedName returns the artifact name a verification record key stands
// for.
func VerifiedName(job naming.Job, key string) (string, bool) {
	return underDir(job.VerifiedPrefix(), key)
}

// MarkerName returns the artifact name an in-progress marker key stands for.
func MarkerName(job naming.Job, key string) (string, bool) {
	return underDir(job.RunningPrefix(), key)
}

func underDir(dir, key string) (string, bool) {
	rest, ok := strings.CutPrefix(key, dir+"/")
	if !ok || strings.Contains(rest, "/") {
		return "", false
	}
	return strings.CutSuffix(rest, ".json")
}

// artifactOf returns the artifact name an object of the job's directory
// belongs to: the artifact itself, its manifest or marker, or a PVC
// temporary file of any of them (".<base>.partial-<random>"), or one of
// its parts (a multi-part artifact's "<name>.d/…").
func artifactOf(job naming.Job, key string) string {
	if name, ok := job.PartOf(key); ok {
		return name
	}
	dir, base := path.Split(key)
	if strings.HasPrefix(base, ".") {
		if i := strings.LastIndex(base, ".partial-"); i > 0 {
			base = base[1:i]
		}
	}
	switch strings.TrimSuffix(dir, "/") {
	case job.EntriesPrefix(), job.RunningPrefix(), job.VerifiedPrefix():
		return strings.TrimSuffix(base, ".json")
	}
	return base
}
