// Package store holds the agent's artifact stores: a mounted path (PVC) and
// S3-compatible object storage. Keys are slash-separated and relative to the
// store root (the mount path, or the bucket plus prefix).
package store

import (
	"context"
	"errors"
	"io"
	"time"
)

// ErrNotFound is returned (wrapped) by Get for a missing key.
var ErrNotFound = errors.New("not found")

// Object is one stored object.
type Object struct {
	Key     string
	Size    int64
	ModTime time.Time
}

// Store is where artifacts and catalogs live.
type Store interface {
	// Check returns an error unless the store is reachable and usable: the
	// PVC path is a mounted directory, or the bucket exists and answers.
	Check(ctx context.Context) error
	// Put stores everything read from r under key and returns the number of
	// bytes stored. The object becomes visible under key only after r
	// returned io.EOF and the data is durable; if r returns any other error,
	// or ctx ends, or the process dies, nothing is visible under key (an
	// existing object under key is left as it was).
	Put(ctx context.Context, key string, r io.Reader) (int64, error)
	// Get opens key for reading. A missing key yields an error wrapping
	// ErrNotFound.
	Get(ctx context.Context, key string) (io.ReadCloser, error)
	// Delete removes key; a missing key is not an error.
	Delete(ctx context.Context, key string) error
	// List returns every object under the directory dir (recursively),
	// including leftovers of interrupted writes.
	List(ctx context.Context, dir string) ([]Object, error)
	// AbortIncomplete discards interrupted uploads under dir started
	// before the given time (S3 multipart uploads), except those to a key
	// for which keep (if not nil) returns true. It returns how many.
	AbortIncomplete(ctx context.Context, dir string, before time.Time, keep func(key string) bool) (int, error)
	// Path is how key is named in reports: relative to the PVC mount path,
	// or the full object key (with prefix) in the bucket.
	Path(key string) string
	// String describes the store for messages (never with credentials).
	String() string
}
