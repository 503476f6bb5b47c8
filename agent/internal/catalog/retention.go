package catalog

import (
	"fmt"
	"path"
	"slices"
	"time"

	"cairn.dev/agent/internal/naming"
)

// LeftoverGrace is how old an object in a job's directory that no manifest
// lists (the remains of an interrupted backup or of a failed delete) must
// be before prune removes it, and how old an in-progress marker must be
// before its run counts as dead. A running backup refreshes its marker
// every MarkerRefresh, so even a run longer than this is never swept away.
const LeftoverGrace = 24 * time.Hour

// MarkerRefresh is how often a running backup rewrites its in-progress
// marker: far below LeftoverGrace.
const MarkerRefresh = 10 * time.Minute

// Expired returns the entries older than retentionDays at now, oldest first.
// An entry's age counts from its start time. The newest entry (the newest
// successful backup) is never returned, even when it is older than the
// retention period too.
func Expired(entries []Entry, now time.Time, retentionDays int) ([]Entry, error) {
	if retentionDays < 1 {
		return nil, fmt.Errorf("retention days must be at least 1, got %d", retentionDays)
	}
	cutoff := now.Add(-time.Duration(retentionDays) * 24 * time.Hour)
	newest := -1
	for i, e := range entries {
		if newest < 0 || e.Start.After(entries[newest].Start) {
			newest = i
		}
	}
	var out []Entry
	for i, e := range entries {
		if i != newest && e.Start.Before(cutoff) {
			out = append(out, e)
		}
	}
	return out, nil
}

// Object is what a store lists.
type Object struct {
	Key     string
	ModTime time.Time
}

// Index returns the catalog of job: the entries of manifests and of the
// legacy catalog (may be nil) whose artifact is among objects, oldest
// first. A manifest wins over a legacy entry of the same name. An entry
// whose artifact is missing (a manifest written back by a race with a
// prune, a legacy entry an old agent left) is not listed: the index never
// points at missing data.
func Index(job naming.Job, manifests []Entry, legacy *Catalog, objects []Object) *Catalog {
	present := map[string]bool{}
	for _, o := range objects {
		present[o.Key] = true
	}
	c := New(job)
	seen := map[string]bool{}
	add := func(e Entry) {
		if !seen[e.Name] && present[job.Key(e.Name)] {
			seen[e.Name] = true
			c.Entries = append(c.Entries, e)
		}
	}
	for _, e := range manifests {
		add(e)
	}
	if legacy != nil {
		for _, e := range legacy.Entries {
			add(e)
		}
	}
	sortEntries(c.Entries)
	return c
}

// Listing is what prune read of a job's directory, in this order: the
// in-progress markers, then the manifests, then every object (among them
// the verification records, Verified).
//
// The order is what makes Sweep safe against a backup finishing meanwhile.
// A backup writes its marker, then its artifact, then its manifest, and
// deletes its marker last. An artifact in Objects without a manifest in
// Manifests had its manifest written after the manifests were listed, so
// its marker was still there when the markers were listed before — unless
// the run started after that, and then its artifact is younger than
// LeftoverGrace. Either way it is kept.
type Listing struct {
	Markers   []Object
	Manifests []Entry
	Legacy    *Catalog
	Objects   []Object
}

// Verified returns the names of the artifacts with a verification record
// among l.Objects.
func (l Listing) Verified(job naming.Job) map[string]bool {
	out := map[string]bool{}
	for _, o := range l.Objects {
		if name, ok := VerifiedName(job, o.Key); ok {
			out[name] = true
		}
	}
	return out
}

// Sweep returns the objects of a job's directory that prune deletes as
// leftovers at now. Nothing younger than LeftoverGrace is returned, nor
// anything of an artifact whose run's marker is younger than LeftoverGrace
// (a running backup refreshes its marker, see MarkerRefresh), nor a listed
// artifact or its manifest, nor the legacy catalog while it lists a
// present artifact. What is left: artifacts no manifest lists (interrupted
// runs), temporary files, stale markers and manifests whose artifact is
// gone.
func Sweep(job naming.Job, l Listing, now time.Time) []Object {
	fresh := func(o Object) bool { return now.Sub(o.ModTime) <= LeftoverGrace }
	present := map[string]bool{}
	for _, o := range l.Objects {
		present[o.Key] = true
	}
	live := map[string]bool{}
	for _, o := range append(slices.Clone(l.Markers), l.Objects...) {
		if name, ok := MarkerName(job, o.Key); ok && fresh(o) {
			live[name] = true
		}
	}
	listed := map[string]bool{}
	for _, e := range l.Manifests {
		listed[e.Name] = true
	}
	legacyUsed := false
	if l.Legacy != nil {
		for _, e := range l.Legacy.Entries {
			listed[e.Name] = true
			legacyUsed = legacyUsed || present[job.Key(e.Name)]
		}
	}
	for _, o := range l.Objects {
		// A manifest that appeared after the manifests were listed
		// still lists its artifact.
		if name, ok := ManifestName(job, o.Key); ok {
			listed[name] = true
		}
	}
	var out []Object
	for _, o := range l.Objects {
		if fresh(o) || live[artifactOf(job, o.Key)] {
			continue
		}
		if o.Key == job.CatalogKey() {
			if !legacyUsed {
				out = append(out, o)
			}
			continue
		}
		if name, ok := ManifestName(job, o.Key); ok {
			if !present[job.Key(name)] {
				out = append(out, o) // its artifact is gone
			}
			continue
		}
		if _, ok := MarkerName(job, o.Key); ok {
			out = append(out, o) // stale: its run is long dead
			continue
		}
		if name, ok := VerifiedName(job, o.Key); ok {
			if !present[job.Key(name)] {
				out = append(out, o) // its artifact is gone
			}
			continue
		}
		if name := path.Base(o.Key); o.Key == job.Key(name) && listed[name] {
			continue
		}
		if name, ok := job.PartOf(o.Key); ok && listed[name] && present[job.Key(name)] {
			continue // a part of a listed multi-part artifact
		}
		out = append(out, o)
	}
	return out
}

// KeepUpload reports whether an incomplete upload to key must be left
// alone: it belongs to an artifact whose run's marker is fresh at now.
func KeepUpload(job naming.Job, markers []Object, key string, now time.Time) bool {
	name := artifactOf(job, key)
	for _, m := range markers {
		if n, ok := MarkerName(job, m.Key); ok && n == name && now.Sub(m.ModTime) <= LeftoverGrace {
			return true
		}
	}
	return false
}
