package inventory

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"sync"
)

// ArchiveCounts are the row counts of the tables whose data a pg_dump
// custom-format archive holds, read from the archive itself: each table's
// data is one "TABLE DATA" entry of the table of contents and one data
// block of COPY text, one line per row (COPY escapes newlines in values as
// \n, so a raw newline ends a row). What the counts say is exactly what
// the artifact holds.
type ArchiveCounts struct {
	// Rows by table key ("schema.table").
	Rows map[string]int64
	// NoData are the TABLE DATA entries of the TOC whose data block the
	// stream did not carry (keys).
	NoData []string
	// Tables are the TOC's TABLE entries (the tables the archive creates;
	// partitioned tables and partitions included), in TOC order.
	Tables []ArchiveTable
	// Entries is the whole table of contents, in order.
	Entries []ArchiveEntry
}

// ArchiveEntry is one entry of an archive's table of contents.
type ArchiveEntry struct {
	ID          int64
	Desc        string // "TABLE", "INDEX", "FK CONSTRAINT", …
	Schema, Tag string
	Section     int     // SectionPreData, SectionData, SectionPostData (or 1: none)
	Deps        []int64 // the entries it depends on
	// HasData: the entry has a data block (pg_dump's hadDumper).
	HasData bool
	// Defn is the entry's SQL, kept only for the short session and
	// sequence entries a data-only archive holds (ENCODING, STDSTRINGS,
	// SEARCHPATH, SEQUENCE SET); CopyStmt is a TABLE DATA entry's COPY
	// statement.
	Defn, CopyStmt string
}

// Sections of an archive entry (pg_dump's teSection).
const (
	SectionPreData  = 2
	SectionData     = 3
	SectionPostData = 4
)

// ArchiveTable is a table an archive creates.
type ArchiveTable struct{ Schema, Name string }

// The custom format (pg_dump's pg_backup_archiver.c, pg_backup_custom.c):
// a header, the table of contents, then one block per entry with data.
const (
	archCustom = 1
	blkData    = 1
	blkBlobs   = 3
	// Versions read: 1.12 (PostgreSQL 11.x) to 1.16 (PostgreSQL 17).
	archMinVersion = 12
	archMaxVersion = 16
	// maxKeptString bounds the TOC strings the parser keeps (tag, desc,
	// namespace: identifiers and short words); longer ones (definitions)
	// are skipped, not stored.
	maxKeptString = 1 << 12
)

// ArchiveCounter reads a pg_dump custom-format archive written to it
// (pg_dump --format=custom --compress=0) and counts each table's rows. It
// never fails a Write: a stream it cannot read (another format, compressed
// data, a version it does not know, a truncated or corrupt archive) makes
// Result return an error, and the bytes are still consumed.
type ArchiveCounter struct {
	pw   *io.PipeWriter
	done chan struct{}
	res  ArchiveCounts
	err  error
	once sync.Once
}

// NewArchiveCounter starts a counter; call Close (or CloseWithError) when
// the stream ends, then Result.
func NewArchiveCounter() *ArchiveCounter {
	pr, pw := io.Pipe()
	c := &ArchiveCounter{pw: pw, done: make(chan struct{})}
	go func() {
		defer close(c.done)
		c.res, c.err = parseArchive(bufio.NewReaderSize(pr, 64<<10))
		if c.err == nil {
			// Anything after the last block is unexpected.
			if n, _ := io.Copy(io.Discard, pr); n > 0 {
				c.err = fmt.Errorf("%d bytes after the archive's last data block", n)
			}
		}
		// Keep consuming whatever follows so that the writer never blocks.
		_, _ = io.Copy(io.Discard, pr)
		pr.Close()
	}()
	return c
}

// Write passes p to the parser; it always consumes all of p.
func (c *ArchiveCounter) Write(p []byte) (int, error) {
	_, _ = c.pw.Write(p) // the reader drains to EOF: no error but a close
	return len(p), nil
}

// Close ends the stream (the archive is complete).
func (c *ArchiveCounter) Close() error { return c.CloseWithError(nil) }

// CloseWithError ends the stream with an error (the dump failed).
func (c *ArchiveCounter) CloseWithError(err error) error {
	c.once.Do(func() { c.pw.CloseWithError(err) })
	return nil
}

// Result waits for the parser (after Close) and returns the counts.
func (c *ArchiveCounter) Result() (ArchiveCounts, error) {
	c.Close()
	<-c.done
	return c.res, c.err
}

// archReader reads the archive's primitive values.
type archReader struct {
	r       *bufio.Reader
	intSize int
	offSize int
	vmin    int
}

var errTruncated = errors.New("archive ends early")

func (a *archReader) byte() (byte, error) {
	b, err := a.r.ReadByte()
	if err == io.EOF {
		err = errTruncated
	}
	return b, err
}

func (a *archReader) full(n int) ([]byte, error) {
	buf := make([]byte, n)
	if _, err := io.ReadFull(a.r, buf); err != nil {
		if err == io.EOF || err == io.ErrUnexpectedEOF {
			err = errTruncated
		}
		return nil, err
	}
	return buf, nil
}

// int reads a sign byte and intSize little-endian magnitude bytes.
func (a *archReader) int() (int64, error) {
	b, err := a.full(1 + a.intSize)
	if err != nil {
		return 0, err
	}
	var v uint64
	for i := a.intSize; i >= 1; i-- {
		v = v<<8 | uint64(b[i])
	}
	if v > 1<<62 {
		return 0, fmt.Errorf("integer %d out of range", v)
	}
	if b[0] != 0 {
		return -int64(v), nil
	}
	return int64(v), nil
}

// str reads a string: its length (-1: NULL) and bytes. Strings longer than
// keep are skipped and returned empty.
func (a *archReader) str(keep int) (s string, null bool, err error) {
	n, err := a.int()
	if err != nil {
		return "", false, err
	}
	switch {
	case n == -1:
		return "", true, nil
	case n < 0:
		return "", false, fmt.Errorf("string length %d", n)
	case n > int64(keep):
		if _, err := a.r.Discard(int(min(n, 1<<62))); err != nil {
			return "", false, errTruncated
		}
		return "", false, nil
	}
	b, err := a.full(int(n))
	return string(b), false, err
}

type tocEntry struct{ key string }

// parseArchive reads a whole archive.
func parseArchive(r *bufio.Reader) (ArchiveCounts, error) {
	a := &archReader{r: r}
	res := ArchiveCounts{Rows: map[string]int64{}}
	entries, err := a.head()
	if err != nil {
		return res, err
	}
	res.Entries = entries
	data := map[int64]tocEntry{} // dumpId → TABLE DATA entry
	seenKeys := map[string]bool{}
	for _, e := range entries {
		if e.Desc == "TABLE" {
			res.Tables = append(res.Tables, ArchiveTable{Schema: e.Schema, Name: e.Tag})
		}
		if e.Desc == "TABLE DATA" && e.HasData {
			key := Table{Schema: e.Schema, Name: e.Tag}.Key()
			if seenKeys[key] {
				return res, fmt.Errorf("two TABLE DATA entries for %s", key)
			}
			seenKeys[key] = true
			data[e.ID] = tocEntry{key: key}
		}
	}
	counted := map[int64]bool{}
	for {
		blk, err := a.r.ReadByte()
		if err == io.EOF {
			break // the archive's end
		}
		if err != nil {
			return res, err
		}
		id, err := a.int()
		if err != nil {
			return res, err
		}
		switch blk {
		case blkData:
			te, ok := data[id]
			rows, err := a.copyRows()
			if err != nil {
				return res, fmt.Errorf("data block of entry %d: %w", id, err)
			}
			if !ok {
				continue // data of another kind of entry (none expected)
			}
			if counted[id] {
				return res, fmt.Errorf("two data blocks for %s", te.key)
			}
			counted[id] = true
			res.Rows[te.key] = rows
		case blkBlobs:
			for {
				oid, err := a.int()
				if err != nil {
					return res, err
				}
				if oid == 0 {
					break
				}
				if err := a.chunks(func([]byte) {}); err != nil {
					return res, fmt.Errorf("large object %d: %w", oid, err)
				}
			}
		default:
			return res, fmt.Errorf("unknown block type %d", blk)
		}
	}
	for id, te := range data {
		if !counted[id] {
			res.NoData = append(res.NoData, te.key)
		}
	}
	return res, nil
}

// chunks reads length-prefixed chunks until a zero length and hands each
// piece of them to f (pieces of at most the reader's buffer).
func (a *archReader) chunks(f func([]byte)) error {
	for {
		n, err := a.int()
		if err != nil {
			return err
		}
		if n == 0 {
			return nil
		}
		if n < 0 {
			return fmt.Errorf("chunk length %d", n)
		}
		for n > 0 {
			p, err := a.r.Peek(int(min(n, int64(a.r.Size()))))
			if len(p) == 0 {
				if err == nil || err == io.EOF {
					err = errTruncated
				}
				return err
			}
			f(p)
			a.r.Discard(len(p))
			n -= int64(len(p))
		}
	}
}

// copyEnd ends the COPY text of every table's data block: pg_dump writes
// COPY's end marker and two empty lines after the rows
// (dumpTableData_copy).
const copyEnd = "\\.\n\n\n"

// copyRows counts the lines of a data block of COPY text: every line but
// the end marker (copyEnd), which no row can be (a backslash in a value is
// written as \\). A block that does not end with the marker is an error.
func (a *archReader) copyRows() (int64, error) {
	var lines int64
	var tail [len(copyEnd) + 1]byte // the block's last bytes, right-aligned
	var size int64
	err := a.chunks(func(p []byte) {
		lines += int64(countLines(p))
		size += int64(len(p))
		if len(p) >= len(tail) {
			copy(tail[:], p[len(p)-len(tail):])
		} else {
			copy(tail[:], tail[len(p):])
			copy(tail[len(tail)-len(p):], p)
		}
	})
	if err != nil {
		return 0, err
	}
	switch {
	case size == int64(len(copyEnd)) && string(tail[1:]) == copyEnd:
	case size > int64(len(copyEnd)) && tail[0] == '\n' && string(tail[1:]) == copyEnd:
	default:
		return 0, fmt.Errorf("COPY data of %d bytes does not end with pg_dump's end marker", size)
	}
	return lines - 3, nil
}
