package store

import (
	"context"
	"fmt"
	"io"
	"time"

	"github.com/minio/minio-go/v7"
)

// Object Lock modes (CAIRN_S3_OBJECT_LOCK).
const (
	LockGovernance = "GOVERNANCE"
	LockCompliance = "COMPLIANCE"
)

// Locker is a store that can write objects under S3 Object Lock retention
// and say until when an object is locked.
type Locker interface {
	// PutRetained is Put with retention in the store's lock mode until
	// until: neither this version nor its retention can be removed before
	// (COMPLIANCE: by anyone; GOVERNANCE: without the bypass permission).
	PutRetained(ctx context.Context, key string, r io.Reader, until time.Time) (int64, error)
	// LockOf is the Object Lock retention of key's current version (zero
	// when it has none).
	LockOf(ctx context.Context, key string) (Lock, error)
	// ExtendLock sets the retention of key's current version to mode until
	// until. S3 refuses shortening a retention (and turning COMPLIANCE into
	// GOVERNANCE): callers only ever extend.
	ExtendLock(ctx context.Context, key, mode string, until time.Time) error
	// LockMode is GOVERNANCE or COMPLIANCE, or "" when locking is off.
	LockMode() string
}

// Lock is an object version's Object Lock retention.
type Lock struct {
	Mode  string // GOVERNANCE or COMPLIANCE; "" when not locked
	Until time.Time
}

var _ Locker = (*S3)(nil)

// LockMode returns the configured Object Lock mode.
func (s *S3) LockMode() string { return s.cfg.LockMode }

// PutRetained writes key with Object Lock retention until until.
func (s *S3) PutRetained(ctx context.Context, key string, r io.Reader, until time.Time) (int64, error) {
	if s.cfg.LockMode == "" {
		return s.Put(ctx, key, r)
	}
	mode := minio.RetentionMode(s.cfg.LockMode)
	if !mode.IsValid() {
		return 0, fmt.Errorf("object lock mode %q: want GOVERNANCE or COMPLIANCE", s.cfg.LockMode)
	}
	return s.put(ctx, key, r, minio.PutObjectOptions{Mode: mode, RetainUntilDate: until.UTC()})
}

// LockOf reads the retention from the object's headers (HEAD):
// GetObjectRetention's reply is not read by every S3-compatible server's
// client alike (versitygw 1.8 answers <ObjectLockRetention>, which
// minio-go does not parse), the headers are.
func (s *S3) LockOf(ctx context.Context, key string) (Lock, error) {
	info, err := s.client.StatObject(ctx, s.cfg.Bucket, s.objectKey(key), minio.StatObjectOptions{})
	if err != nil {
		return Lock{}, s.wrap("stat "+s.objectKey(key), err)
	}
	v := info.Metadata.Get("X-Amz-Object-Lock-Retain-Until-Date")
	if v == "" {
		return Lock{}, nil
	}
	t, err := time.Parse(time.RFC3339, v)
	if err != nil {
		return Lock{}, fmt.Errorf("object %s: retain-until %q: %w", s.objectKey(key), v, err)
	}
	return Lock{Mode: info.Metadata.Get("X-Amz-Object-Lock-Mode"), Until: t}, nil
}

// ExtendLock puts the retention (PutObjectRetention) of key's current
// version.
func (s *S3) ExtendLock(ctx context.Context, key, mode string, until time.Time) error {
	m := minio.RetentionMode(mode)
	if !m.IsValid() {
		return fmt.Errorf("object lock mode %q: want GOVERNANCE or COMPLIANCE", mode)
	}
	u := until.UTC()
	err := s.client.PutObjectRetention(ctx, s.cfg.Bucket, s.objectKey(key), minio.PutObjectRetentionOptions{Mode: &m, RetainUntilDate: &u})
	return s.wrap("put retention of "+s.objectKey(key), err)
}
