package inventory

import (
	"bytes"
	"context"
	"encoding/binary"
	"io"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"cairn.dev/agent/internal/engine"
)

// The tables whose counts the archive must get right: empty, values with
// newlines, backslashes, tabs and a COPY end marker's text, bytea, rows
// longer than the counter's read buffer, a large table of many chunks, a
// partitioned table (its partitions are the tables with data), names that
// need quoting, and large objects (a block of another kind).
const pgArchiveSchema = `
CREATE SCHEMA "we.ird ""s""";
CREATE TABLE public.empty (id int);
CREATE TABLE public.texts (id int, v text);
INSERT INTO public.texts VALUES (1, E'line1\nline2\n'), (2, E'back\\slash\\.'), (3, E'tab\there\r\n'), (4, E'\\.'),
  (5, E'\n'), (6, NULL), (7, ''), (8, E'\\.\n'), (9, repeat(E'x\n', 100000));
CREATE TABLE public.bin (id int, b bytea);
INSERT INTO public.bin SELECT i, decode(repeat(md5(i::text), i % 50), 'hex') || E'\\x0a5c2e0a'::bytea FROM generate_series(1, 2000) i;
CREATE TABLE public.big (id int, v text);
INSERT INTO public.big SELECT i, md5(i::text) FROM generate_series(1, 250000) i;
CREATE TABLE public.parted (id int, v text) PARTITION BY RANGE (id);
CREATE TABLE public.parted_1 PARTITION OF public.parted FOR VALUES FROM (0) TO (100);
CREATE TABLE public.parted_2 PARTITION OF public.parted FOR VALUES FROM (100) TO (1000);
CREATE TABLE public.parted_3 PARTITION OF public.parted FOR VALUES FROM (1000) TO (2000);
INSERT INTO public.parted SELECT i, 'p' || i FROM generate_series(0, 999) i;
CREATE TABLE "we.ird ""s"""."t.a b" (v text);
INSERT INTO "we.ird ""s"""."t.a b" VALUES ('a'), ('b'), ('c');
CREATE UNLOGGED TABLE public.unlogged (v int);
INSERT INTO public.unlogged SELECT generate_series(1, 7);
CREATE MATERIALIZED VIEW public.mv AS SELECT * FROM public.big WHERE id < 10;
SELECT lo_from_bytea(0, 'large object one'), lo_from_bytea(0, repeat('z', 300000)::bytea);
`

// dumpArchive returns the agent's pg_dump of db (custom format, no
// compression).
func dumpArchive(t *testing.T, db string) []byte {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	var buf bytes.Buffer
	e := &engine.Postgres{Conn: pgConn(db)}
	if err := e.Dump(ctx, &buf); err != nil {
		t.Fatalf("pg_dump %s: %v", db, err)
	}
	return buf.Bytes()
}

// countArchive feeds archive to an ArchiveCounter in writes of the given
// sizes (cycled).
func countArchive(archive []byte, sizes ...int) (ArchiveCounts, error) {
	c := NewArchiveCounter()
	for i := 0; len(archive) > 0; i++ {
		n := min(sizes[i%len(sizes)], len(archive))
		if w, err := c.Write(archive[:n]); w != n || err != nil {
			return ArchiveCounts{}, io.ErrShortWrite
		}
		archive = archive[n:]
	}
	return c.Result()
}

func TestArchiveCountsMatchCountStar(t *testing.T) {
	needPG(t)
	const db = "inv_archive"
	pgSQL(t, "postgres", "DROP DATABASE IF EXISTS "+db+"; CREATE DATABASE "+db)
	pgSQL(t, db, pgArchiveSchema)
	want := take(t, "postgres", pgConn(db), Options{Method: MethodRowCount})
	if len(want.Tables) < 10 {
		t.Fatalf("inventory has %d tables: %s", len(want.Tables), keys(want))
	}
	archive := dumpArchive(t, db)
	for _, sizes := range [][]int{{len(archive)}, {32 << 10}, {1, 7, 4096, 3}} {
		got, err := countArchive(archive, sizes...)
		if err != nil {
			t.Fatalf("writes of %v bytes: %v", sizes, err)
		}
		if len(got.NoData) != 0 {
			t.Errorf("writes of %v bytes: TABLE DATA without data: %v", sizes, got.NoData)
		}
		for _, tb := range want.Tables {
			if tb.Schema == LargeObjectsSchema && tb.Name == LargeObjectsName {
				continue // not a table of the archive's
			}
			n, ok := got.Rows[tb.Key()]
			if !ok || n != tb.Rows {
				t.Errorf("writes of %v bytes: %s has %d rows in the archive (present %v), count(*) %d", sizes, tb.Key(), n, ok, tb.Rows)
			}
		}
		for _, k := range []string{"public.parted", "public.mv"} {
			if _, ok := got.Rows[k]; ok {
				t.Errorf("%s has no data of its own, but the archive counts gave it %d rows", k, got.Rows[k])
			}
		}
	}
	// The known counts, so that a wrong count(*) cannot hide a wrong parser.
	got, _ := countArchive(archive, 1<<20)
	for k, n := range map[string]int64{"public.empty": 0, "public.texts": 9, "public.big": 250000, "public.parted_2": 900,
		`"we.ird ""s"""."t.a b"`: 3, "public.bin": 2000} {
		if got.Rows[k] != n {
			t.Errorf("%s: %d rows, want %d", k, got.Rows[k], n)
		}
	}

	// TakeCounted with the archive's counts is the RowCount inventory;
	// without counts it scans, and says which tables it scanned.
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	p, err := OpenPostgres(ctx, pgConn(db))
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	tx, snap, err := ExportSnapshot(ctx, p.C)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback(context.Background())
	q, err := OpenPostgres(ctx, pgConn(db))
	if err != nil {
		t.Fatal(err)
	}
	defer q.Close()
	inv, scanned, err := q.TakeCounted(ctx, Options{Snapshot: snap}, got.Rows)
	if err != nil {
		t.Fatal(err)
	}
	if len(scanned) != 0 {
		t.Errorf("scanned %v with every count at hand", scanned)
	}
	if v := Compare(want, inv, MethodRowCount); v.Mismatched != 0 || v.Matched != len(want.Tables) || !inv.Consistent || inv.Method != MethodRowCount {
		t.Errorf("TakeCounted vs Take: %+v (inventory %+v)", v, inv)
	}
	partial := map[string]int64{}
	for k, n := range got.Rows {
		if k != "public.big" {
			partial[k] = n
		}
	}
	inv, scanned, err = q.TakeCounted(ctx, Options{Snapshot: snap}, partial)
	if err != nil {
		t.Fatal(err)
	}
	if strings.Join(scanned, ",") != "public.big" {
		t.Errorf("scanned %v, want public.big", scanned)
	}
	if v := Compare(want, inv, MethodRowCount); v.Mismatched != 0 {
		t.Errorf("TakeCounted with a count missing: %+v", v)
	}
}

// TestArchiveCounterRefuses: what is not an uncompressed custom-format
// archive, or is cut short, is an error, never a count.
func TestArchiveCounterRefuses(t *testing.T) {
	needPG(t)
	const db = "inv_archive_small"
	pgSQL(t, "postgres", "DROP DATABASE IF EXISTS "+db+"; CREATE DATABASE "+db)
	pgSQL(t, db, "CREATE TABLE t (v text); INSERT INTO t SELECT md5(i::text) FROM generate_series(1, 100) i")
	archive := dumpArchive(t, db)
	if got, err := countArchive(archive, 100); err != nil || got.Rows["public.t"] != 100 {
		t.Fatalf("whole archive: %v, %v", got.Rows, err)
	}
	for name, in := range map[string][]byte{
		"empty":          {},
		"plain SQL":      []byte("--\n-- PostgreSQL database dump\n--\nCOPY t (v) FROM stdin;\na\n\\.\n"),
		"truncated":      archive[:len(archive)-3],
		"trailing bytes": append(append([]byte{}, archive...), 0, 0, 0),
		"other version":  append([]byte("PGDMP\x01\x11\x00"), archive[8:]...),
		"compressed":     compressedHeader(archive),
		"no end marker":  bytes.Replace(archive, []byte("\\.\n\n\n"), []byte("x\n\n\n"), 1),
	} {
		if got, err := countArchive(in, 4096); err == nil {
			t.Errorf("%s: counted %v, want an error", name, got.Rows)
		}
	}
}

// compressedHeader is archive with its header saying compression level 6
// (1.14) or gzip (1.15+).
func compressedHeader(archive []byte) []byte {
	b := append([]byte{}, archive...)
	if b[6] >= 15 {
		b[11] = 1
	} else {
		b[12] = 6 // sign byte at 11, magnitude little-endian from 12
	}
	return b
}

// FuzzArchiveCounter: any input, however cut or corrupted, ends in counts
// or an error, never a panic or a hang, and the counter always consumes
// every byte written.
func FuzzArchiveCounter(f *testing.F) {
	f.Add(seedArchive(), 1)
	f.Add(seedArchive()[:40], 3)
	f.Add([]byte("PGDMP"), 1)
	f.Fuzz(func(t *testing.T, in []byte, step int) {
		step = 1 + abs(step)%8192
		c := NewArchiveCounter()
		for p := in; len(p) > 0; {
			n := min(step, len(p))
			if w, err := c.Write(p[:n]); w != n || err != nil {
				t.Fatalf("Write = %d, %v", w, err)
			}
			p = p[n:]
		}
		res, err := c.Result()
		if err == nil {
			for k, n := range res.Rows {
				if n < 0 {
					t.Fatalf("%s: %d rows", k, n)
				}
			}
		}
	})
}

func abs(n int) int {
	if n < 0 {
		return -n
	}
	return n
}

// archWriter writes a 1.14 custom-format archive by hand (4-byte
// integers, 8-byte offsets, no compression).
type archWriter struct{ bytes.Buffer }

func (b *archWriter) int(v int) {
	sign := byte(0)
	if v < 0 {
		sign, v = 1, -v
	}
	b.WriteByte(sign)
	var m [4]byte
	binary.LittleEndian.PutUint32(m[:], uint32(v))
	b.Write(m[:])
}

func (b *archWriter) str(s string) { b.int(len(s)); b.WriteString(s) }

// header writes the archive's header and the count of TOC entries.
func (b *archWriter) header(entries int) {
	b.WriteString("PGDMP\x01\x0e\x00\x04\x08\x01")
	b.int(0) // compression
	for range 7 {
		b.int(1)
	}
	b.str("db")
	b.str("15.0")
	b.str("15.0")
	b.int(entries)
}

// seedArchive builds a small 1.14 archive by hand: one TABLE DATA entry
// (public.t, 2 rows) and a large-object block.
func seedArchive() []byte {
	var b archWriter
	wi, ws := b.int, b.str
	b.header(2)
	for id, e := range []struct{ tag, desc string }{{"t", "TABLE DATA"}, {"BLOBS", "BLOBS"}} {
		wi(id + 1)
		wi(1)
		ws("0")
		ws("0")
		ws(e.tag)
		ws(e.desc)
		wi(3)
		for _, s := range []string{"", "", "COPY public.t (v) FROM stdin;\n", "public", "", "", "owner", "false"} {
			ws(s)
		}
		wi(-1) // no dependencies
		b.Write(make([]byte, 9))
	}
	b.WriteByte(1)
	wi(1)
	ws("a\tb\n")
	ws("c\n")
	ws("\\.\n\n\n") // pg_dump's end of the table's COPY data
	wi(0)
	b.WriteByte(3)
	wi(2)
	wi(16384)
	ws("blob")
	wi(0)
	wi(0)
	return b.Bytes()
}

// TestArchiveCounterSeed: the hand-built archive counts as built, and
// random corruptions of it never panic (the fuzz target's seed corpus
// runs in every go test; this adds a few thousand mutations).
func TestArchiveCounterSeed(t *testing.T) {
	seed := seedArchive()
	got, err := countArchive(seed, 5)
	if err != nil || got.Rows["public.t"] != 2 || len(got.Rows) != 1 {
		t.Fatalf("seed archive: %v, %v", got, err)
	}
	r := rand.New(rand.NewPCG(1, 2))
	for range 3000 {
		in := append([]byte{}, seed...)
		switch r.IntN(3) {
		case 0:
			in = in[:r.IntN(len(in))]
		case 1:
			for range 1 + r.IntN(4) {
				in[r.IntN(len(in))] = byte(r.UintN(256))
			}
		case 2:
			i := r.IntN(len(in))
			in = append(in[:i:i], append([]byte{byte(r.UintN(256))}, in[i:]...)...)
		}
		countArchive(in, 1+r.IntN(64)) // must return
	}
}
