package catalog

import (
	"fmt"
	"time"
)

// LeftoverGrace is how old an object in a job's directory that the catalog
// does not list (the remains of an interrupted backup or of a failed delete)
// must be before prune removes it. It is longer than any sane backup run, so
// a backup still in progress is never swept away.
const LeftoverGrace = 24 * time.Hour

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

// Leftovers returns the objects of a job directory that the catalog does not
// account for (neither the catalog itself nor a listed artifact) and that
// were last modified more than LeftoverGrace before now.
func Leftovers(objs []Object, catalogKey string, c *Catalog, keyOf func(name string) string, now time.Time) []Object {
	listed := map[string]bool{catalogKey: true}
	for _, e := range c.Entries {
		listed[keyOf(e.Name)] = true
	}
	var out []Object
	for _, o := range objs {
		if listed[o.Key] || now.Sub(o.ModTime) <= LeftoverGrace {
			continue
		}
		out = append(out, o)
	}
	return out
}
