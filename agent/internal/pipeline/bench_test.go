package pipeline

import (
	"bytes"
	"context"
	"io"
	"syscall"
	"testing"
	"time"

	"filippo.io/age"

	"cairn.dev/agent/internal/store"
)

// discard is a store that reads and drops what it is given.
type discard struct{ store.Store }

func (discard) Put(_ context.Context, _ string, r io.Reader) (int64, error) {
	return io.Copy(io.Discard, r)
}

// BenchmarkBackupEncoding is the agent's own cost per byte of dump, without
// the database or the store: zstd alone vs zstd then age. A real backup
// adds pg_dump or mysqldump and the store, so encryption's share of a real
// backup's time is smaller than the ratio here.
func BenchmarkBackupEncoding(b *testing.B) {
	data := testData(256 << 20)
	rec, _ := keyPair(b)
	for _, c := range []struct {
		name string
		enc  Encoding
	}{{"zstd", Encoding{Level: DefaultLevel}}, {"zstd+age", Encoding{Level: DefaultLevel, Recipients: rec}}} {
		b.Run(c.name, func(b *testing.B) {
			b.SetBytes(int64(len(data)))
			before := cpu()
			var stored int64
			for b.Loop() {
				w, err := Backup(context.Background(), &fakeEngine{data: data}, discard{}, "k", c.enc)
				if err != nil {
					b.Fatal(err)
				}
				stored = w.Size
			}
			// CPU time (user + system) of the process per run: far less
			// moved by other load on the machine than wall time.
			b.ReportMetric(float64(cpu()-before)/float64(b.N)/1e6, "cpu-ms/op")
			b.ReportMetric(float64(stored)/(1<<20), "stored-MiB")
		})
	}
}

func cpu() time.Duration {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// BenchmarkAgeAlone is age's own speed on incompressible (compressed-like)
// bytes: a backup pays it once per stored byte.
func BenchmarkAgeAlone(b *testing.B) {
	rec, _ := keyPair(b)
	data := make([]byte, 64<<20)
	for i := range data {
		data[i] = byte(i*2654435761>>13) ^ byte(i>>7)
	}
	b.SetBytes(int64(len(data)))
	before := cpu()
	for b.Loop() {
		w, err := age.Encrypt(io.Discard, rec.Age()...)
		if err != nil {
			b.Fatal(err)
		}
		if _, err := w.Write(data); err != nil {
			b.Fatal(err)
		}
		if err := w.Close(); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(cpu()-before)/float64(b.N)/1e6, "cpu-ms/op")
}

// memory is a store of one object held in memory.
type memory struct {
	store.Store
	data []byte
}

func (m *memory) Put(_ context.Context, _ string, r io.Reader) (int64, error) {
	var err error
	m.data, err = io.ReadAll(r)
	return int64(len(m.data)), err
}

func (m *memory) Get(context.Context, string) (io.ReadCloser, error) {
	return io.NopCloser(bytes.NewReader(m.data)), nil
}

func (m *memory) Path(key string) string { return key }

// BenchmarkRestoreDecoding is the agent's own cost per byte a restore
// gives the restore tool: checksum, zstd and the hold-back, without the
// store's transport or the database.
func BenchmarkRestoreDecoding(b *testing.B) {
	data := testData(256 << 20)
	m := &memory{}
	w, err := Backup(context.Background(), &fakeEngine{data: data}, m, "k", Encoding{Level: DefaultLevel})
	if err != nil {
		b.Fatal(err)
	}
	b.SetBytes(int64(len(data)))
	before := cpu()
	for b.Loop() {
		if err := Restore(context.Background(), m, "k", w.Size, w.Checksum, nil, drain{&fakeEngine{}}); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(cpu()-before)/float64(b.N)/1e6, "cpu-ms/op")
}

// drain is an engine whose restore reads and drops its input.
type drain struct{ *fakeEngine }

func (drain) Restore(_ context.Context, r io.Reader) error {
	_, err := io.Copy(io.Discard, r)
	return err
}
