package inventory

import (
	"bufio"
	"bytes"
	"errors"
	"io"
	"math/rand/v2"
	"strings"
	"testing"
)

// archiveWithData builds a 1.14 archive by hand: one TABLE DATA entry
// (public.t) whose data block is text cut into the given chunks.
func archiveWithData(chunks []string) []byte {
	var b archWriter
	wi, ws := b.int, b.str
	b.header(2)
	for id, e := range []struct{ tag, desc, defn, copy string }{
		{"ENCODING", "ENCODING", "SET client_encoding = 'UTF8';\n", ""},
		{"t", "TABLE DATA", "", "COPY public.t (v) FROM stdin;\n"},
	} {
		wi(id + 1)
		wi(map[bool]int{true: 1}[e.desc == "TABLE DATA"])
		ws("0")
		ws("0")
		ws(e.tag)
		ws(e.desc)
		wi(3)
		for _, s := range []string{e.defn, "", e.copy, "public", "", "", "owner", "false"} {
			ws(s)
		}
		wi(-1) // no dependencies
		b.Write(make([]byte, 9))
	}
	b.WriteByte(1)
	wi(2)
	for _, c := range chunks {
		ws(c)
	}
	wi(0)
	return b.Bytes()
}

// readCopy opens archive, reads its one data block with reads of the
// given size and expects the archive's end after it.
func readCopy(archive []byte, size int) (string, *CopyText, error) {
	ar, err := OpenArchive(bufio.NewReaderSize(bytes.NewReader(archive), 16))
	if err != nil {
		return "", nil, err
	}
	id, ct, err := ar.Next()
	if err != nil {
		return "", nil, err
	}
	if id != 2 {
		return "", nil, errors.New("wrong entry")
	}
	var out bytes.Buffer
	buf := make([]byte, size)
	for {
		n, err := ct.Read(buf)
		out.Write(buf[:n])
		if err == io.EOF {
			break
		}
		if err != nil {
			return out.String(), ct, err
		}
	}
	if _, _, err := ar.Next(); err != io.EOF {
		return out.String(), ct, errors.New("no end after the block")
	}
	return out.String(), ct, nil
}

// cut cuts s into chunks of random sizes (some empty-looking: 1 byte).
func cut(r *rand.Rand, s string) []string {
	var c []string
	for len(s) > 0 {
		n := min(len(s), 1+r.IntN(9))
		c = append(c, s[:n])
		s = s[n:]
	}
	return c
}

// TestCopyText: the rows come out exactly, without pg_dump's end marker,
// whatever the chunks (the marker split across them) and the read sizes
// (every size from 1 byte, where the tail cannot be held back in place);
// the entries' statements are kept; a block without the marker, cut
// short, or with a row after the marker is an error.
func TestCopyText(t *testing.T) {
	rows := "a\tb\n\\\\.\n\\.x\n\n" + strings.Repeat("row\\n\t\\N\n", 50)
	r := rand.New(rand.NewPCG(3, 4))
	for size := 1; size < 80; size++ {
		for _, body := range []string{rows, ""} {
			got, ct, err := readCopy(archiveWithData(cut(r, body+copyEnd)), size)
			if err != nil || got != body {
				t.Fatalf("read size %d: %q, %v; want %q", size, got, err, body)
			}
			if ct.Rows != int64(strings.Count(body, "\n")) || ct.Size != int64(len(body)) {
				t.Fatalf("read size %d: %d rows, %d bytes", size, ct.Rows, ct.Size)
			}
		}
	}
	ar, err := OpenArchive(bufio.NewReader(bytes.NewReader(archiveWithData([]string{copyEnd}))))
	if err != nil {
		t.Fatal(err)
	}
	if e := ar.Entries; len(e) != 2 || e[0].Defn != "SET client_encoding = 'UTF8';\n" || e[1].CopyStmt != "COPY public.t (v) FROM stdin;\n" || !e[1].HasData || e[0].HasData {
		t.Fatalf("entries: %+v", e)
	}
	for name, chunks := range map[string][]string{
		"no marker":          {"a\n", "b\n"},
		"marker not at end":  {"a\n", copyEnd, "b\n"},
		"marker cut":         {"a\n\\.\n\n"},
		"no newline":         {"a" + copyEnd},
		"marker only, short": {"\\.\n"},
	} {
		for size := 1; size < 12; size++ {
			if _, _, err := readCopy(archiveWithData(chunks), size); err == nil {
				t.Errorf("%s, read size %d: no error", name, size)
			}
		}
	}
	whole := archiveWithData([]string{rows + copyEnd})
	for n := 0; n < len(whole)-1; n++ {
		if _, _, err := readCopy(whole[:n], 64); err == nil {
			t.Fatalf("cut at %d of %d: no error", n, len(whole))
		}
	}
}

// TestCopyTextBatchesRows: pg_dump writes a chunk per row; a Read returns
// as many as are at hand, not one (one COPY message per row made a
// restore 2.4 times slower).
func TestCopyTextBatchesRows(t *testing.T) {
	var chunks []string
	for i := range 20000 {
		chunks = append(chunks, strings.Repeat("x", i%100)+"\n")
	}
	chunks = append(chunks, copyEnd)
	ar, err := OpenArchive(bufio.NewReaderSize(bytes.NewReader(archiveWithData(chunks)), 256<<10))
	if err != nil {
		t.Fatal(err)
	}
	_, ct, err := ar.Next()
	if err != nil {
		t.Fatal(err)
	}
	reads := 0
	buf := make([]byte, 64<<10)
	for err == nil {
		_, err = ct.Read(buf)
		reads++
	}
	if err != io.EOF || ct.Rows != 20000 {
		t.Fatalf("%v after %d rows", err, ct.Rows)
	}
	if max := 3 * int(ct.Size/int64(len(buf))+1); reads > max {
		t.Errorf("%d reads for %d bytes of rows, want at most %d", reads, ct.Size, max)
	}
}

// FuzzCopyText: any rows (ending with a newline), cut into chunks anywhere
// and read with any buffer size, come out exactly; any chunks without the
// marker end in rows or an error, never a panic or a hang.
func FuzzCopyText(f *testing.F) {
	f.Add([]byte("a\tb\n\\\\.\n\\.\n\n\n"), uint16(3), uint8(7))
	f.Add([]byte(""), uint16(1), uint8(0))
	f.Fuzz(func(t *testing.T, rows []byte, seed uint16, size uint8) {
		body := string(rows)
		if body != "" && !strings.HasSuffix(body, "\n") {
			body += "\n"
		}
		r := rand.New(rand.NewPCG(uint64(seed), 1))
		got, ct, err := readCopy(archiveWithData(cut(r, body+copyEnd)), 1+int(size))
		if err != nil || got != body || ct.Rows != int64(strings.Count(body, "\n")) {
			t.Fatalf("read size %d: %q, %v; want %q", 1+int(size), got, err, body)
		}
		readCopy(archiveWithData(cut(r, string(rows))), 1+int(size))
	})
}
