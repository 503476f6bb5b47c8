package pipeline

import (
	"github.com/klauspost/compress/zstd"

	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"io"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strconv"
	"testing"

	"cairn.dev/agent/internal/store"
)

// fakeEngine dumps data (then fails with dumpErr, if set) and records
// what a restore reads.
type fakeEngine struct {
	data     []byte
	dumpErr  error
	restored bytes.Buffer
}

func (f *fakeEngine) Name() string                      { return "postgres" }
func (f *fakeEngine) Format() string                    { return "fake" }
func (f *fakeEngine) Prepare(ctx context.Context) error { return nil }

func (f *fakeEngine) Dump(ctx context.Context, w io.Writer) error {
	for chunk := f.data; len(chunk) > 0; {
		n := min(len(chunk), 64<<10)
		if _, err := w.Write(chunk[:n]); err != nil {
			return err
		}
		chunk = chunk[n:]
		if err := ctx.Err(); err != nil {
			return err
		}
	}
	return f.dumpErr
}

func (f *fakeEngine) Restore(ctx context.Context, r io.Reader) error {
	_, err := io.Copy(&f.restored, r)
	return err
}

// testData is compressible text with some random bytes.
func testData(n int) []byte {
	rng := rand.New(rand.NewPCG(1, 2))
	var b bytes.Buffer
	for b.Len() < n {
		b.WriteString("INSERT INTO t VALUES (")
		for i := 0; i < 8; i++ {
			b.WriteByte(byte(rng.IntN(256)))
		}
		b.WriteString(");\n")
	}
	return b.Bytes()[:n]
}

func pvc(t *testing.T) (*store.PVC, string) {
	dir := t.TempDir()
	st, err := store.NewPVC(dir)
	if err != nil {
		t.Fatal(err)
	}
	return st, dir
}

func files(t *testing.T, dir string) []string {
	var out []string
	filepath.WalkDir(dir, func(p string, d os.DirEntry, err error) error {
		if err == nil && !d.IsDir() {
			rel, _ := filepath.Rel(dir, p)
			out = append(out, rel)
		}
		return nil
	})
	return out
}

func TestBackupVerifyRestore(t *testing.T) {
	for _, size := range []int{0, 1, 100 << 10, 3 << 20} {
		t.Run(strconv.Itoa(size), func(t *testing.T) {
			st, dir := pvc(t)
			eng := &fakeEngine{data: testData(size)}
			ctx := context.Background()
			w, err := Backup(ctx, eng, st, "ns/job/a.pgdump.zst", Encoding{Level: DefaultLevel})
			if err != nil {
				t.Fatal(err)
			}
			stored, err := os.ReadFile(filepath.Join(dir, "ns/job/a.pgdump.zst"))
			if err != nil {
				t.Fatal(err)
			}
			sum := sha256.Sum256(stored)
			if w.Size != int64(len(stored)) || w.Checksum != "sha256:"+hex.EncodeToString(sum[:]) {
				t.Fatalf("Written %+v does not describe the %d stored bytes", w, len(stored))
			}
			if size > 1<<20 && len(stored) > size/2 {
				t.Errorf("not compressed: %d -> %d bytes", size, len(stored))
			}
			if got := files(t, dir); len(got) != 1 {
				t.Fatalf("store holds %v, want only the artifact", got)
			}
			if err := Verify(ctx, st, "ns/job/a.pgdump.zst", w.Size, w.Checksum, nil); err != nil {
				t.Fatal(err)
			}
			target := &fakeEngine{}
			if err := Restore(ctx, st, "ns/job/a.pgdump.zst", w.Size, w.Checksum, nil, target); err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(target.restored.Bytes(), eng.data) {
				t.Fatalf("restored %d bytes differ from the %d dumped", target.restored.Len(), len(eng.data))
			}
		})
	}
}

func TestBackupDumpFailsLeavesNothing(t *testing.T) {
	st, dir := pvc(t)
	boom := errors.New("pg_dump failed (exit status 1): connection lost")
	eng := &fakeEngine{data: testData(2 << 20), dumpErr: boom}
	_, err := Backup(context.Background(), eng, st, "ns/job/a.pgdump.zst", Encoding{Level: DefaultLevel})
	if !errors.Is(err, boom) {
		t.Fatalf("Backup error = %v, want the dump's error", err)
	}
	if got := files(t, dir); len(got) != 0 {
		t.Fatalf("a failed dump left %v", got)
	}
}

// failingStore accepts limit bytes, then fails.
type failingStore struct {
	store.Store
	limit int64
	read  int64
}

var errStore = errors.New("store broke")

func (f *failingStore) Put(ctx context.Context, key string, r io.Reader) (int64, error) {
	n, err := io.CopyN(io.Discard, r, f.limit)
	f.read = n
	if err != nil {
		return n, err
	}
	return n, errStore
}

func TestBackupStoreFailsStopsDump(t *testing.T) {
	st, _ := pvc(t)
	eng := &fakeEngine{data: testData(64 << 20)}
	fs := &failingStore{Store: st, limit: 64 << 10}
	_, err := Backup(context.Background(), eng, fs, "ns/job/a.pgdump.zst", Encoding{Level: DefaultLevel})
	if !errors.Is(err, errStore) {
		t.Fatalf("Backup error = %v, want the store's error", err)
	}
}

func TestVerifyAndRestoreRefuseCorruption(t *testing.T) {
	st, dir := pvc(t)
	eng := &fakeEngine{data: testData(1 << 20)}
	ctx := context.Background()
	key := "ns/job/a.pgdump.zst"
	w, err := Backup(ctx, eng, st, key, Encoding{Level: DefaultLevel})
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, key)
	good, _ := os.ReadFile(path)

	tests := []struct {
		name   string
		mangle func([]byte) []byte
	}{
		{"flipped bit", func(b []byte) []byte { b[len(b)/3] ^= 0x10; return b }},
		{"truncated", func(b []byte) []byte { return b[:len(b)-1] }},
		{"appended", func(b []byte) []byte { return append(b, 0) }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			bad := tt.mangle(bytes.Clone(good))
			if err := os.WriteFile(path, bad, 0o640); err != nil {
				t.Fatal(err)
			}
			if err := Verify(ctx, st, key, w.Size, w.Checksum, nil); !errors.Is(err, ErrCorrupted) {
				t.Fatalf("Verify = %v, want ErrCorrupted", err)
			}
			// If the artifact changes between Verify and Restore, Restore
			// still fails with ErrCorrupted.
			if err := Restore(ctx, st, key, w.Size, w.Checksum, nil, &fakeEngine{}); !errors.Is(err, ErrCorrupted) {
				t.Fatalf("Restore = %v, want ErrCorrupted", err)
			}
		})
	}
}

// brokenReadStore serves limit bytes of every Get, then a read error (a
// connection reset mid-download).
type brokenReadStore struct {
	store.Store
	limit int64
}

var errRead = errors.New("connection reset by peer")

func (b *brokenReadStore) Get(ctx context.Context, key string) (io.ReadCloser, error) {
	rc, err := b.Store.Get(ctx, key)
	if err != nil {
		return nil, err
	}
	return struct {
		io.Reader
		io.Closer
	}{io.MultiReader(io.LimitReader(rc, b.limit), errReader{}), rc}, nil
}

type errReader struct{}

func (errReader) Read([]byte) (int, error) { return 0, errRead }

// A store that fails while Restore streams an intact artifact is a store
// error (the agent retries it), not corruption (which it does not).
func TestRestoreReadErrorIsNotCorruption(t *testing.T) {
	st, _ := pvc(t)
	ctx := context.Background()
	key := "ns/job/a.pgdump.zst"
	w, err := Backup(ctx, &fakeEngine{data: testData(1 << 20)}, st, key, Encoding{Level: DefaultLevel})
	if err != nil {
		t.Fatal(err)
	}
	for _, limit := range []int64{0, 100, w.Size / 2} {
		t.Run(strconv.FormatInt(limit, 10), func(t *testing.T) {
			err := Restore(ctx, &brokenReadStore{Store: st, limit: limit}, key, w.Size, w.Checksum, nil, &fakeEngine{})
			if !errors.Is(err, errRead) || errors.Is(err, ErrCorrupted) {
				t.Fatalf("Restore = %v, want the read error and not ErrCorrupted", err)
			}
		})
	}
}

// holdBack never passes on the last n bytes before its source ended, and
// passes everything once it did; an error drops what it withheld.
func TestHoldBack(t *testing.T) {
	data := make([]byte, 300<<10)
	for i := range data {
		data[i] = byte(i * 7)
	}
	for _, n := range []int{0, 1, 1000, HoldBack, 400 << 10} {
		pr, pw := io.Pipe()
		h := &holdBack{r: pr, n: n}
		done := make(chan []byte)
		go func() {
			var got []byte
			buf := make([]byte, 7777)
			for {
				k, err := h.Read(buf)
				got = append(got, buf[:k]...)
				if err != nil {
					break
				}
			}
			done <- got
		}()
		// Write everything, then check how much went through before EOF.
		var passed []byte
		go func() { pw.Write(data); pw.CloseWithError(errors.New("broken")) }()
		passed = <-done
		if want := max(0, len(data)-n); len(passed) > want {
			t.Errorf("n=%d: %d bytes passed before the source ended, want at most %d", n, len(passed), want)
		}
		pr2, pw2 := io.Pipe()
		go func() { pw2.Write(data); pw2.Close() }()
		all, err := io.ReadAll(&holdBack{r: pr2, n: n})
		if err != nil || !bytes.Equal(all, data) {
			t.Errorf("n=%d: read %d bytes, %v; want all %d", n, len(all), err, len(data))
		}
	}
}

func TestDefaultLevelIsFastest(t *testing.T) {
	for _, l := range []Level{DefaultLevel, ""} {
		got, err := l.encoderLevel()
		if err != nil || got != zstd.SpeedFastest {
			t.Errorf("level %q: %v, %v; want SpeedFastest (docs/benchmarks-log.md, encoder comparison)", l, got, err)
		}
	}
	if got, _ := Level("default").encoderLevel(); got != zstd.SpeedDefault {
		t.Errorf(`level "default": %v, want SpeedDefault (about zstd -3)`, got)
	}
}
