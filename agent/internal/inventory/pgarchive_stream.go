package inventory

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"strconv"
)

// keptDefns are the entries whose SQL (Defn) head keeps.
var keptDefns = map[string]bool{"ENCODING": true, "STDSTRINGS": true, "SEARCHPATH": true, "SEQUENCE SET": true}

// maxCopyStmt bounds a kept COPY statement (a table of 1600 columns with
// long quoted names fits).
const maxCopyStmt = 1 << 20

// head reads the archive's header and table of contents.
func (a *archReader) head() ([]ArchiveEntry, error) {
	head, err := a.full(11)
	if err != nil {
		return nil, err
	}
	if string(head[:5]) != "PGDMP" {
		return nil, errors.New("not a pg_dump custom-format archive (no PGDMP magic)")
	}
	vmaj, vmin := head[5], head[6]
	if vmaj != 1 || vmin < archMinVersion || vmin > archMaxVersion {
		return nil, fmt.Errorf("archive version %d.%d.%d is not one this agent reads (1.%d to 1.%d)", vmaj, vmin, head[7], archMinVersion, archMaxVersion)
	}
	a.vmin = int(vmin)
	a.intSize, a.offSize = int(head[8]), int(head[9])
	if a.intSize < 1 || a.intSize > 8 || a.offSize < 1 || a.offSize > 8 {
		return nil, fmt.Errorf("archive integer size %d, offset size %d", a.intSize, a.offSize)
	}
	if head[10] != archCustom {
		return nil, fmt.Errorf("archive format %d is not custom (%d)", head[10], archCustom)
	}
	if a.vmin >= 15 {
		alg, err := a.byte()
		if err != nil {
			return nil, err
		}
		if alg != 0 {
			return nil, fmt.Errorf("archive data is compressed (algorithm %d)", alg)
		}
	} else {
		level, err := a.int()
		if err != nil {
			return nil, err
		}
		if level != 0 {
			return nil, fmt.Errorf("archive data is compressed (level %d)", level)
		}
	}
	for range 7 { // creation time
		if _, err := a.int(); err != nil {
			return nil, err
		}
	}
	for range 3 { // database name, server version, pg_dump version
		if _, _, err := a.str(maxKeptString); err != nil {
			return nil, err
		}
	}
	count, err := a.int()
	if err != nil {
		return nil, err
	}
	if count < 0 {
		return nil, fmt.Errorf("TOC entry count %d", count)
	}
	var entries []ArchiveEntry
	ids := map[int64]bool{}
	for range count {
		id, err := a.int()
		if err != nil {
			return nil, err
		}
		if id <= 0 {
			return nil, fmt.Errorf("TOC entry id %d", id)
		}
		if ids[id] {
			return nil, fmt.Errorf("two TOC entries with id %d", id)
		}
		ids[id] = true
		hadDumper, err := a.int()
		if err != nil {
			return nil, err
		}
		var f [10]string // tableoid, oid, tag, desc, defn, drop, copy, namespace, tablespace, tableam
		var section int64
		for i := range f {
			if i == 4 { // section, between desc and defn
				if section, err = a.int(); err != nil {
					return nil, err
				}
			}
			keep := maxKeptString
			switch {
			case i == 4 && !keptDefns[f[3]], i == 5:
				keep = 0 // a definition not needed, the DROP statement
			case i == 6 && f[3] == "TABLE DATA":
				keep = maxCopyStmt
			}
			if f[i], _, err = a.str(keep); err != nil {
				return nil, err
			}
		}
		if a.vmin >= 16 { // relkind
			if _, err := a.int(); err != nil {
				return nil, err
			}
		}
		for range 2 { // owner, "false" (was: with OIDs)
			if _, _, err := a.str(maxKeptString); err != nil {
				return nil, err
			}
		}
		var deps []int64
		for { // dependencies, until NULL
			d, null, err := a.str(maxKeptString)
			if err != nil {
				return nil, err
			}
			if null {
				break
			}
			dep, err := strconv.ParseInt(d, 10, 64)
			if err != nil {
				return nil, fmt.Errorf("TOC entry %d: dependency %q is not a number", id, d)
			}
			deps = append(deps, dep)
		}
		// The custom format's extra: the data's offset (flag + offSize).
		if _, err := a.full(1 + a.offSize); err != nil {
			return nil, err
		}
		e := ArchiveEntry{ID: id, Desc: f[3], Schema: f[7], Tag: f[2], Section: int(section), Deps: deps,
			HasData: hadDumper != 0, Defn: f[4], CopyStmt: f[6]}
		if (e.Desc == "TABLE" || e.Desc == "TABLE DATA" && e.HasData) && (e.Tag == "" || e.Schema == "") {
			return nil, fmt.Errorf("%s entry %d without a table or schema name", e.Desc, id)
		}
		entries = append(entries, e)
	}
	return entries, nil
}

// ArchiveReader reads a custom-format archive in order, as it streams:
// the table of contents first (OpenArchive), then block after block.
type ArchiveReader struct {
	a       *archReader
	Entries []ArchiveEntry
	block   *CopyText
}

// OpenArchive reads the header and the table of contents of the archive r
// streams (pg_dump --format=custom --compress=0).
func OpenArchive(r *bufio.Reader) (*ArchiveReader, error) {
	a := &archReader{r: r}
	entries, err := a.head()
	if err != nil {
		return nil, err
	}
	return &ArchiveReader{a: a, Entries: entries}, nil
}

// Next starts the next block and returns its entry's id and, for a data
// block, its COPY text (a reader of the rows); a large-object block is an
// error. At the archive's end (the stream's clean end) it returns io.EOF.
// The previous block must have been read to its end.
func (ar *ArchiveReader) Next() (int64, *CopyText, error) {
	if ar.block != nil && !ar.block.end {
		return 0, nil, errors.New("the previous data block was not read to its end")
	}
	blk, err := ar.a.r.ReadByte()
	if err != nil {
		return 0, nil, err // io.EOF: the end
	}
	id, err := ar.a.int()
	if err != nil {
		return 0, nil, err
	}
	if blk != blkData {
		return 0, nil, fmt.Errorf("block of type %d (entry %d): only data blocks are read", blk, id)
	}
	ar.block = &CopyText{a: ar.a}
	return id, ar.block, nil
}

// CopyText reads a data block's COPY text, the rows only: pg_dump's end
// marker (copyEnd) is checked and withheld, so the text can be sent as a
// COPY … FROM STDIN's data. A block that does not end with the marker is
// an error at its end.
type CopyText struct {
	a     *archReader
	left  int64 // bytes left in the current chunk
	end   bool
	held  [len(copyEnd)]byte // the last bytes read, not passed on yet
	nheld int
	last  byte // the last byte passed on
	err   error
	small []byte // what a short Read left over
	// Size and Rows count what was passed on: bytes and lines.
	Size, Rows int64
}

func (c *CopyText) Read(p []byte) (int, error) {
	if len(c.small) > 0 {
		n := copy(p, c.small)
		c.small = c.small[n:]
		return n, nil
	}
	if len(p) <= 2*len(c.held) {
		// Too short to hold the tail back in place: read a longer piece
		// and hand it out in turns.
		buf := make([]byte, 4<<10)
		n, err := c.Read(buf)
		c.small = buf[:n]
		if n == 0 {
			return 0, err
		}
		return c.Read(p)
	}
	for {
		if c.err != nil {
			return 0, c.err
		}
		// p: the held-back bytes, then as many chunks as are at hand (a
		// chunk is often one row: one Read per chunk would make one COPY
		// message, and one write, per row).
		total := copy(p, c.held[:c.nheld])
		for total < len(p) && !c.end {
			if c.left == 0 {
				if total > c.nheld && c.a.r.Buffered() < 1+c.a.intSize {
					break // pass on what is here rather than wait for more
				}
				n, err := c.a.int()
				switch {
				case err != nil:
					c.err = err
					return 0, err
				case n < 0:
					c.err = fmt.Errorf("chunk length %d", n)
					return 0, c.err
				case n == 0:
					c.end = true
				default:
					c.left = n
				}
				continue
			}
			m, err := c.a.r.Read(p[total:min(int64(len(p)), int64(total)+c.left)])
			c.left -= int64(m)
			total += m
			if m == 0 && err != nil {
				if err == io.EOF {
					err = errTruncated
				}
				c.err = err
				return 0, err
			}
			if c.a.r.Buffered() == 0 {
				break
			}
		}
		out := total - min(total, len(c.held))
		c.nheld = copy(c.held[:], p[out:total])
		if out > 0 {
			c.last = p[out-1]
			c.Size += int64(out)
			c.Rows += int64(countLines(p[:out]))
		}
		if c.end {
			if c.nheld != len(copyEnd) || string(c.held[:]) != copyEnd || (c.Size > 0 && c.last != '\n') {
				c.err = fmt.Errorf("COPY data of %d bytes does not end with pg_dump's end marker", c.Size+int64(c.nheld))
				return 0, c.err
			}
			c.err = io.EOF
			if out == 0 {
				return 0, io.EOF
			}
		}
		if out > 0 {
			return out, nil
		}
	}
}

func countLines(p []byte) int { return bytes.Count(p, []byte{'\n'}) }
