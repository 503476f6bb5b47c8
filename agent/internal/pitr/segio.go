package pitr

// Storing and reading one segment: file → zstd → age (when the archive is
// encrypted) → store, and back, checked against its record.

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path"
	"strings"

	"filippo.io/age"
	"github.com/klauspost/compress/zstd"

	"cairn.dev/agent/internal/crypt"
	"cairn.dev/agent/internal/store"
)

// encryptedExt ends the object of an encrypted segment, as it ends an
// encrypted artifact.
const encryptedExt = ".age"

// objectKey is the store key of s's stored bytes.
func (s Segment) objectKey(dir string) string {
	k := path.Join(dir, s.File+".zst")
	if s.Encryption != nil {
		k += encryptedExt
	}
	return k
}

// SegmentKeys are the store keys of segment file in dir, its record first,
// then its object (plain or encrypted: whichever exists).
func SegmentKeys(dir, file string) []string {
	obj := path.Join(dir, file+".zst")
	return []string{recordKey(dir, file), obj, obj + encryptedExt}
}

// Keys are the store keys of archived segment file, its record first,
// then its object as its record names it (prune deletes these).
func (ix *Index) Keys(file string) []string {
	s, ok := ix.Segments[file]
	if !ok {
		return SegmentKeys(ix.Dir, file)
	}
	return []string{recordKey(ix.Dir, file), s.objectKey(ix.Dir)}
}

func recordKey(dir, file string) string { return path.Join(dir, file+".json") }

// ErrUnreadable: a segment of a recovery's chain cannot be used — its
// object is missing, truncated, changed, or does not authenticate. It is
// never replayed: a chain through it is refused like one across a gap
// (errors.Is(err, ErrGap) holds too).
var ErrUnreadable = errors.New("an archived segment is unreadable")

type unreadableError struct{ file, detail string }

func (e *unreadableError) Error() string {
	return fmt.Sprintf("%s: %s is not replayed (%s); %s at %s: nothing after it can be recovered from this base",
		ErrUnreadable, e.file, e.detail, ErrGap, e.file)
}

func (e *unreadableError) Is(target error) bool { return target == ErrUnreadable || target == ErrGap }

func unreadable(file, format string, args ...any) error {
	return &unreadableError{file: file, detail: fmt.Sprintf(format, args...)}
}

// put stores the file at local as segment seg in dir: the compressed (and,
// with recipients, encrypted) object first, then its record. Nothing of
// the file is written anywhere but into the store's object.
func put(ctx context.Context, st store.Store, dir, local string, seg Segment, recipients *crypt.Recipients) (Segment, error) {
	f, err := os.Open(local)
	if err != nil {
		return seg, err
	}
	defer f.Close()
	seg.Encryption = nil
	if recipients != nil {
		seg.Encryption = recipients.Record()
	}
	pr, pw := io.Pipe()
	go func() { pw.CloseWithError(encode(pw, f, recipients)) }()
	h := sha256.New()
	n, err := st.Put(ctx, seg.objectKey(dir), io.TeeReader(pr, h))
	if err != nil {
		pr.CloseWithError(err)
		return seg, fmt.Errorf("storing segment %s: %w", seg.File, err)
	}
	seg.Size, seg.Checksum = n, "sha256:"+hex.EncodeToString(h.Sum(nil))
	rec, err := json.Marshal(seg)
	if err != nil {
		return seg, err
	}
	if _, err := st.Put(ctx, recordKey(dir, seg.File), strings.NewReader(string(rec))); err != nil {
		return seg, fmt.Errorf("storing the record of segment %s: %w", seg.File, err)
	}
	return seg, nil
}

// encode writes r to w through zstd, then age to recipients when given
// (encrypted in 64 KiB chunks in memory, as a dump is).
func encode(w io.Writer, r io.Reader, recipients *crypt.Recipients) error {
	var sealed io.WriteCloser
	if recipients != nil {
		var err error
		if sealed, err = age.Encrypt(w, recipients.Age()...); err != nil {
			return fmt.Errorf("encrypt: %w", err)
		}
		w = sealed
	}
	enc, err := zstd.NewWriter(w, zstd.WithEncoderLevel(zstd.SpeedDefault))
	if err != nil {
		return err
	}
	_, err = io.Copy(enc, r)
	if cerr := enc.Close(); err == nil {
		err = cerr
	}
	if sealed != nil && err == nil {
		// The final chunk: without it the segment does not decrypt.
		err = sealed.Close()
	}
	return err
}

// CheckKeys refuses, before anything is read, a chain with an encrypted
// segment that ids cannot decrypt (ids nil: no identity given): the coded
// error (crypt.KeyError) names the segment and the recipients it needs.
func CheckKeys(st store.Store, dir string, chain []Segment, ids *crypt.Identities) error {
	for _, s := range chain {
		if s.Encryption == nil {
			continue
		}
		if err := crypt.MatchNamed("archived segment "+st.Path(s.objectKey(dir)), s.Encryption, ids); err != nil {
			return err
		}
	}
	return nil
}

// fetch writes segment s, checked against its record, decrypted with ids
// when it is encrypted, and decompressed, to the local file dst. A segment
// whose stored bytes do not match its record, are cut short, or do not
// authenticate is unreadable (ErrUnreadable, also ErrGap); one whose
// identity does not open it is a coded crypt.KeyError.
func fetch(ctx context.Context, st store.Store, dir string, s Segment, dst string, ids *crypt.Identities) error {
	key := s.objectKey(dir)
	if s.Encryption != nil {
		if err := crypt.MatchNamed("archived segment "+st.Path(key), s.Encryption, ids); err != nil {
			return err
		}
	}
	rc, err := st.Get(ctx, key)
	if err != nil {
		return unreadable(s.File, "reading %s: %v", st.Path(key), err)
	}
	defer rc.Close()
	h := sha256.New()
	counted := &countingReader{r: io.TeeReader(rc, h)}
	var compressed io.Reader = counted
	var decErr error
	if s.Encryption != nil {
		compressed, decErr = age.Decrypt(counted, ids.Age()...)
	}
	if decErr == nil {
		decErr = decompress(compressed, dst)
	}
	var local *localError
	if errors.As(decErr, &local) {
		return local.err // the local disk, not the segment
	}
	// What the decoders did not read is hashed too: the record is checked
	// first, so a changed object is reported as such, whatever failed.
	if _, err := io.Copy(io.Discard, counted); err != nil {
		return unreadable(s.File, "reading %s: %v", st.Path(key), err)
	}
	if counted.n != s.Size {
		return unreadable(s.File, "%s has %d bytes, its record says %d", st.Path(key), counted.n, s.Size)
	}
	if got := "sha256:" + hex.EncodeToString(h.Sum(nil)); got != s.Checksum {
		return unreadable(s.File, "%s is corrupt: its bytes hash to %s, its record says %s", st.Path(key), got, s.Checksum)
	}
	var nm *age.NoIdentityMatchError
	switch {
	case decErr == nil:
		return nil
	case errors.As(decErr, &nm):
		// The record names a recipient of ids, the object's header does
		// not: the record does not describe these bytes.
		return crypt.MismatchNamed("archived segment "+st.Path(key), s.Encryption, ids)
	}
	return unreadable(s.File, "%s does not decrypt or decompress: %v", st.Path(key), decErr)
}

// decompress writes the zstd stream r to the file dst.
func decompress(r io.Reader, dst string) error {
	dec, err := zstd.NewReader(r, zstd.WithDecoderConcurrency(1))
	if err != nil {
		return err
	}
	defer dec.Close()
	out, err := os.Create(dst)
	if err != nil {
		return &localError{err}
	}
	if _, err := io.Copy(localWriter{out}, dec); err != nil {
		out.Close()
		return err
	}
	if err := out.Close(); err != nil {
		return &localError{err}
	}
	return nil
}

// localError is a failure to write the fetched segment on the local disk.
type localError struct{ err error }

func (e *localError) Error() string { return e.err.Error() }

type localWriter struct{ w io.Writer }

func (l localWriter) Write(p []byte) (int, error) {
	n, err := l.w.Write(p)
	if err != nil {
		err = &localError{err}
	}
	return n, err
}

type countingReader struct {
	r io.Reader
	n int64
}

func (c *countingReader) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.n += int64(n)
	return n, err
}
