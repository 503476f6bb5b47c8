// Package pipeline moves a dump between an engine and a store as a stream:
// engine → zstd → (age) → SHA-256 → store on the way out, and store →
// SHA-256 → (age) → zstd → engine on the way in. Nothing is buffered whole,
// in memory or on disk, and with encryption no plaintext byte leaves the
// process: memory stays flat whatever the database size.
//
// Compression is zstd (github.com/klauspost/compress, already a dependency
// of minio-go, so it costs nothing extra) rather than gzip: at its default
// level it compresses several times faster than gzip's default in pure Go
// and smaller, decompresses faster still, bounds its memory by the window
// size, carries a checksum per frame, and the zstd command line tool reads
// artifacts by hand (`zstd -d < artifact | pg_restore …`).
package pipeline

import (
	"bufio"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"hash"
	"io"

	"filippo.io/age"
	"github.com/klauspost/compress/zstd"

	"cairn.dev/agent/internal/crypt"
	"cairn.dev/agent/internal/engine"
	"cairn.dev/agent/internal/store"
)

// WindowSize is the zstd window: the encoder's and decoder's memory scale
// with it. 4 MiB is above the zstd CLI's default level (2 MiB) yet keeps the
// agent well inside its memory budget.
const WindowSize = 4 << 20

// Level is a zstd compression level by name: "fastest" (about zstd -1),
// "default" (about zstd -3), "better" (about zstd -7). The names are the
// encoder's; the agent's default is DefaultLevel.
type Level string

// DefaultLevel is the level used unless configured otherwise: "fastest".
// On a 1 GB pg_dump (docs/benchmarks-log.md, encoder comparison, 2026-12-03)
// it used about 30 % less CPU than "default" and stored 1.3 % fewer bytes
// (377.3 vs 382.4 MB; zstd -3: 388.7 MB): the dump's long runs of table
// data gain nothing from the slower matcher. A larger window or encoder
// concurrency 2 gained nothing there either.
const DefaultLevel Level = "fastest"

func (l Level) encoderLevel() (zstd.EncoderLevel, error) {
	switch l {
	case "fastest", "":
		return zstd.SpeedFastest, nil
	case "default":
		return zstd.SpeedDefault, nil
	case "better":
		return zstd.SpeedBetterCompression, nil
	}
	return 0, fmt.Errorf("compression level %q: want fastest, default or better", string(l))
}

// Valid reports whether l names a level.
func (l Level) Valid() error { _, err := l.encoderLevel(); return err }

// ChecksumPrefix marks the algorithm in checksum strings.
const ChecksumPrefix = "sha256:"

// Encoding is how a backup encodes the dump: the zstd level, and the age
// recipients to encrypt to after compression (nil: not encrypted).
type Encoding struct {
	Level      Level
	Recipients *crypt.Recipients
}

// Written is what a backup stored.
type Written struct {
	Size     int64
	Checksum string
}

// Backup streams the engine's dump, compressed and checksummed, to key.
// The object exists under key only if the dump tool succeeded and the store
// confirmed every byte.
func Backup(ctx context.Context, eng engine.Engine, st store.Store, key string, level Encoding) (Written, error) {
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)

	pr, pw := io.Pipe()
	// The checksum is taken on the store's side of the pipe, of exactly
	// the bytes the store read; the dump's goroutine only compresses.
	h := sha256.New()
	counted := &CountingWriter{W: pw}
	dumpDone := make(chan error, 1)
	go func() {
		err := dump(ctx, eng, counted, level)
		if err != nil {
			// The store reads this error instead of EOF and discards the
			// upload: nothing becomes visible under key.
			pw.CloseWithError(&DumpError{Err: err})
		} else {
			pw.Close()
		}
		dumpDone <- err
	}()

	n, putErr := st.Put(ctx, key, io.TeeReader(pr, h))
	if putErr != nil {
		// Stop the dump (if still running): its writes fail and the tool is
		// terminated.
		pr.CloseWithError(putErr)
		cancel(putErr)
	}
	derr := <-dumpDone
	var de *DumpError
	switch {
	case errors.As(putErr, &de):
		return Written{}, de.Err // the dump failed first: that is the cause
	case putErr != nil:
		return Written{}, putErr
	case derr != nil:
		// Cannot happen (the store only commits after EOF), but never
		// leave an object behind for a failed dump.
		_ = st.Delete(context.WithoutCancel(ctx), key)
		return Written{}, derr
	}
	if n != counted.N {
		_ = st.Delete(context.WithoutCancel(ctx), key)
		return Written{}, fmt.Errorf("store %s stored %d bytes of %s, expected %d", st, n, key, counted.N)
	}
	return Written{Size: counted.N, Checksum: sum(h)}, nil
}

func dump(ctx context.Context, eng engine.Engine, w io.Writer, e Encoding) error {
	zl, err := e.Level.encoderLevel()
	if err != nil {
		return err
	}
	var sealed io.WriteCloser
	if e.Recipients != nil {
		// age encrypts in 64 KiB chunks as they come: the compressed
		// stream is encrypted in memory on its way to the store.
		if sealed, err = age.Encrypt(w, e.Recipients.Age()...); err != nil {
			return fmt.Errorf("encrypt: %w", err)
		}
		w = sealed
	}
	enc, err := zstd.NewWriter(w,
		zstd.WithEncoderLevel(zl),
		zstd.WithEncoderConcurrency(1),
		zstd.WithWindowSize(WindowSize),
		zstd.WithEncoderCRC(true),
	)
	if err != nil {
		return err
	}
	err = eng.Dump(ctx, enc)
	if cerr := enc.Close(); err == nil {
		err = cerr
	}
	if sealed != nil && err == nil {
		// The final chunk: without it the artifact does not decrypt.
		err = sealed.Close()
	}
	return err
}

// DumpError is how a failed dump reaches the store: as the stream's error.
type DumpError struct{ Err error }

func (e *DumpError) Error() string { return "dump failed: " + e.Err.Error() }
func (e *DumpError) Unwrap() error { return e.Err }

// Verify reads key whole and checks its size and checksum. With ids (an
// encrypted artifact), it also decrypts the whole stream, so that a key
// that does not open the artifact (ErrNoIdentityMatch) or a payload that
// does not authenticate is found before anything is written anywhere.
func Verify(ctx context.Context, st store.Store, key string, size int64, checksum string, ids *crypt.Identities) error {
	rc, err := st.Get(ctx, key)
	if err != nil {
		return err
	}
	defer rc.Close()
	hr := &hashingReader{r: rc, h: sha256.New()}
	buf := make([]byte, 1<<20)
	var decErr error
	if ids != nil {
		var plain io.Reader
		if plain, decErr = age.Decrypt(hr, ids.Age()...); decErr == nil {
			_, decErr = io.CopyBuffer(io.Discard, plain, buf)
		}
	}
	if _, err := io.CopyBuffer(io.Discard, hr, buf); err != nil {
		return fmt.Errorf("read %s: %w", st.Path(key), err)
	}
	if hr.err != nil && !errors.Is(hr.err, io.EOF) {
		return fmt.Errorf("read %s: %w", st.Path(key), hr.err)
	}
	if err := check(st.Path(key), hr.n, sum(hr.h), size, checksum); err != nil {
		return err
	}
	return decryptErr(st.Path(key), decErr)
}

// ErrNoIdentityMatch is wrapped by the error of a decryption whose
// identities are not among the artifact's recipients.
var ErrNoIdentityMatch = errors.New("no identity matches the artifact's recipients")

// decryptErr classifies a decryption error of bytes that matched their
// checksum: the wrong key, or an artifact that was stored broken.
func decryptErr(name string, err error) error {
	var nm *age.NoIdentityMatchError
	switch {
	case err == nil:
		return nil
	case errors.As(err, &nm):
		return fmt.Errorf("%s: %w", name, ErrNoIdentityMatch)
	}
	return &corruptError{fmt.Sprintf("%s does not decrypt: %v", name, err)}
}

// hashingReader hashes and counts what it reads, and keeps its first error.
type hashingReader struct {
	r   io.Reader
	h   hash.Hash
	n   int64
	err error
}

func (v *hashingReader) Read(p []byte) (int, error) {
	if v.err != nil {
		return 0, v.err
	}
	n, err := v.r.Read(p)
	v.h.Write(p[:n])
	v.n += int64(n)
	if err != nil {
		v.err = err
	}
	return n, err
}

// ErrCorrupted is wrapped by the errors of a failed integrity check.
var ErrCorrupted = errors.New("artifact is corrupted")

func check(name string, n int64, got string, size int64, want string) error {
	if n != size {
		return &corruptError{fmt.Sprintf("%s has %d bytes, the catalog recorded %d", name, n, size)}
	}
	if got != want {
		return &corruptError{fmt.Sprintf("%s has checksum %s, the catalog recorded %s", name, got, want)}
	}
	return nil
}

type corruptError struct{ detail string }

func (e *corruptError) Error() string { return ErrCorrupted.Error() + ": " + e.detail }
func (e *corruptError) Unwrap() error { return ErrCorrupted }

// Restore streams key, decompressed, into the engine. It checks the
// checksum again while streaming and fails the stream on a mismatch. The
// last HoldBack bytes of the decompressed stream reach the tool only once
// every stored byte was read and matched size and checksum, so the tool
// cannot have read a complete dump before the stream is known good; on a
// failed stream the engine kills the tool instead of ending its input
// (engine.StreamError), so a PostgreSQL restore dies inside its single
// transaction and commits nothing. Call Verify first: it keeps a corrupted
// artifact from touching the target at all.
//
// With ids the artifact is age-encrypted: it is decrypted in memory between
// the store and zstd, never written anywhere in plaintext except into the
// restore tool's input.
func Restore(ctx context.Context, st store.Store, key string, size int64, checksum string, ids *crypt.Identities, eng engine.Engine) error {
	rc, err := st.Get(ctx, key)
	if err != nil {
		return err
	}
	defer rc.Close()
	vr := &verifyingReader{r: rc, h: sha256.New(), name: st.Path(key), size: size, want: checksum}
	var compressed io.Reader = vr
	if ids != nil {
		// age reads the header here, before the restore tool starts.
		if compressed, err = age.Decrypt(vr, ids.Age()...); err != nil {
			// Bytes that changed since Verify are corruption, not a key
			// problem: read the rest to know (the target is untouched).
			_, _ = io.CopyBuffer(io.Discard, vr, make([]byte, 1<<20))
			if vr.err != nil && !errors.Is(vr.err, io.EOF) {
				var ce *corruptError
				if errors.As(vr.err, &ce) {
					return vr.err
				}
				return fmt.Errorf("read %s: %w", st.Path(key), vr.err)
			}
			return decryptErr(st.Path(key), err)
		}
	}
	// The decoder reads a block's 3-byte header, then its body: from the
	// store's reader directly, each is a system call (PVC) or a read of
	// the HTTP body's 4 KiB buffer (S3). Reads of 1 MiB instead. (Measured
	// when S3 reads went through minio-go's Object, a goroutine round trip
	// each: −13 % agent CPU per restore; store.S3.Get reads the body
	// directly since.)
	dec, err := zstd.NewReader(bufio.NewReaderSize(compressed, 1<<20),
		zstd.WithDecoderConcurrency(1),
		zstd.WithDecoderLowmem(true),
		zstd.WithDecoderMaxWindow(64<<20),
	)
	if err != nil {
		return err
	}
	defer dec.Close()
	pr, pw := io.Pipe()
	copyErr := make(chan error, 1)
	go func() {
		_, err := io.CopyBuffer(pw, decodeErrs{dec, vr}, make([]byte, 256<<10))
		if err == nil {
			// Drain what the decoder did not need, so the checksum covers
			// every stored byte.
			_, err = io.Copy(io.Discard, vr)
		} else if errors.Is(err, io.ErrClosedPipe) {
			// The tool stopped reading (it failed): read the rest, so that
			// a corrupted stream whose garbage the tool choked on before
			// its end is reported as corrupted (vr.err), not as the tool's
			// error. A restore reads the artifact once more only when it
			// failed anyway.
			_, _ = io.Copy(io.Discard, vr)
		}
		pw.CloseWithError(err)
		copyErr <- err
	}()
	err = eng.Restore(ctx, &holdBack{r: pr, n: HoldBack})
	pr.Close()
	cerr := <-copyErr
	// A corrupted stream is the cause of whatever the restore tool said.
	var ce *corruptError
	if errors.As(cerr, &ce) {
		return cerr
	}
	if vr.err != nil && !errors.Is(vr.err, io.EOF) {
		if errors.As(vr.err, &ce) {
			return vr.err
		}
		// So is a failed read from the store (retryable, not corruption).
		return fmt.Errorf("read %s: %w", st.Path(key), vr.err)
	}
	if err == nil && cerr != nil && !errors.Is(cerr, io.ErrClosedPipe) {
		return cerr
	}
	return err
}

// HoldBack is how many bytes at the end of a restore stream are withheld
// from the restore tool until the whole artifact is verified. A pg_dump
// custom-format archive has no trailer: pg_restore commits as soon as it
// has read the last data block, without waiting for the end of input, so
// the tail must not reach it before the checksum matched.
const HoldBack = 64 << 10

// holdBack passes r on, always keeping the last n bytes it read until r
// ended with io.EOF; on any other error the withheld bytes are dropped.
type holdBack struct {
	r   io.Reader
	n   int
	buf []byte
	eof bool
}

func (h *holdBack) Read(p []byte) (int, error) {
	for !h.eof && len(h.buf) <= h.n {
		if cap(h.buf)-len(h.buf) < 32<<10 {
			h.buf = append(make([]byte, 0, 2*cap(h.buf)+64<<10), h.buf...)
		}
		m, err := h.r.Read(h.buf[len(h.buf):cap(h.buf)])
		h.buf = h.buf[:len(h.buf)+m]
		if err == io.EOF {
			h.eof = true
		} else if err != nil {
			h.buf = nil
			return 0, err
		}
	}
	avail := len(h.buf)
	if !h.eof {
		avail -= h.n
	}
	if avail == 0 {
		return 0, io.EOF // only when h.eof
	}
	k := copy(p, h.buf[:avail])
	h.buf = h.buf[:copy(h.buf, h.buf[k:])]
	return k, nil
}

// decodeErrs marks decompression errors as corruption, but not a failed
// read from the store that the decoder passes on: that one may be transient.
type decodeErrs struct {
	r   io.Reader
	src *verifyingReader
}

func (d decodeErrs) Read(p []byte) (int, error) {
	n, err := d.r.Read(p)
	if err != nil && err != io.EOF {
		var ce *corruptError
		switch {
		case errors.As(err, &ce):
		case d.src.err != nil && !errors.Is(d.src.err, io.EOF) && !errors.As(d.src.err, &ce):
			err = d.src.err
		default:
			err = &corruptError{"cannot decompress: " + err.Error()}
		}
	}
	return n, err
}

type verifyingReader struct {
	r    io.Reader
	h    hash.Hash
	n    int64
	name string
	size int64
	want string
	err  error
}

func (v *verifyingReader) Read(p []byte) (int, error) {
	if v.err != nil {
		return 0, v.err
	}
	n, err := v.r.Read(p)
	v.h.Write(p[:n])
	v.n += int64(n)
	if err == io.EOF {
		if cerr := check(v.name, v.n, sum(v.h), v.size, v.want); cerr != nil {
			err = cerr
		}
	}
	if err != nil {
		v.err = err
	}
	return n, err
}

// CountingWriter passes writes to W and counts the bytes written.
type CountingWriter struct {
	W io.Writer
	N int64
}

func (c *CountingWriter) Write(p []byte) (int, error) {
	n, err := c.W.Write(p)
	c.N += int64(n)
	return n, err
}

func sum(h hash.Hash) string { return ChecksumPrefix + hex.EncodeToString(h.Sum(nil)) }
