// Package pitr is point-in-time recovery for MySQL/MariaDB (issue 27): an
// archiver that streams the server's binary log into the store in closed
// segments, an index of those segments that proves their continuity (a
// missing file is a gap, never silently skipped), and a replay that brings
// a restored dump forward to a chosen second.
//
// A segment is one of the server's binary log files, as the server wrote it
// (mariadb-binlog --read-from-remote-server --raw): the archiver closes the
// current file at least every MaxSegmentAge (FLUSH BINARY LOGS), so the
// newest recoverable second is never older than that while the archiver
// runs. The source is never held back by the archiver: unlike a PostgreSQL
// slot, a binlog reader retains nothing on the server; a reader that was
// away longer than the server keeps its binary logs finds its next file
// gone, and that is recorded as a gap.
package pitr

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"time"
)

// Binary log event types this package reads (MySQL and MariaDB share the
// first ones; the GTID events are MariaDB's).
const (
	eventStop              = 3
	eventRotate            = 4
	eventFormatDescription = 15
	eventMariaGTID         = 162
	eventMariaGTIDList     = 163
	eventMariaCheckpoint   = 161

	// flagArtificial marks events the server makes up for the reader (the
	// fake rotate at the start of a stream): not part of the file's log.
	flagArtificial = 0x20

	headerLen = 19
)

// magic opens every binary log file.
var magic = []byte{0xfe, 'b', 'i', 'n'}

// FileSummary is what a binary log file holds, as far as recovery cares.
type FileSummary struct {
	// First and Last are the timestamps of its first and last logged
	// events (not the format description, nor artificial events): the
	// seconds of the changes it carries. Zero when it carries none.
	First, Last time.Time
	// Events counts the logged events (as First/Last).
	Events int
	// Next is the file the server continued in (the closing rotate event);
	// empty when the file is not closed (still being written, or the
	// server stopped).
	Next string
	// Stopped: the file ends with a stop event (the server shut down; it
	// continues in the next number).
	Stopped bool
	// Size is the file's length in bytes.
	Size int64
}

// Closed says whether the file is complete: the server rotated away from
// it or stopped.
func (s FileSummary) Closed() bool { return s.Next != "" || s.Stopped }

// ScanFile reads a binary log file from r and summarises it. A file cut in
// the middle of an event (still being written) is summarised up to its last
// whole event and reported not closed.
func ScanFile(r io.Reader) (FileSummary, error) {
	br := bufio.NewReaderSize(r, 1<<16)
	var s FileSummary
	head := make([]byte, len(magic))
	if _, err := io.ReadFull(br, head); err != nil {
		return s, fmt.Errorf("binary log: reading its magic: %w", err)
	}
	if string(head) != string(magic) {
		return s, errors.New("binary log: not a binary log file (bad magic)")
	}
	s.Size = int64(len(magic))
	checksum := 0 // bytes of checksum after each event body, from the format description
	hdr := make([]byte, headerLen)
	for {
		if _, err := io.ReadFull(br, hdr); err != nil {
			if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
				return s, nil
			}
			return s, err
		}
		ts := binary.LittleEndian.Uint32(hdr[0:4])
		typ := hdr[4]
		size := binary.LittleEndian.Uint32(hdr[9:13])
		flags := binary.LittleEndian.Uint16(hdr[17:19])
		if size < headerLen || size > 1<<30 {
			return s, fmt.Errorf("binary log: event at %d has size %d", s.Size, size)
		}
		body := make([]byte, size-headerLen)
		if _, err := io.ReadFull(br, body); err != nil {
			if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
				return s, nil // the file is still being written
			}
			return s, err
		}
		s.Size += int64(size)
		switch {
		case typ == eventFormatDescription:
			// binlog version (2), server version (50), create time (4),
			// header length (1), post-header lengths..., then (5.6.1+ /
			// MariaDB 5.3+) the checksum algorithm (1) and its checksum (4).
			if len(body) >= 5 && body[len(body)-5] == 1 { // CRC32
				checksum = 4
			}
			continue
		case flags&flagArtificial != 0:
			continue
		case typ == eventRotate:
			// position (8), then the next file's name.
			if len(body) >= 8+checksum {
				s.Next = string(body[8 : len(body)-checksum])
			}
		case typ == eventStop:
			s.Stopped = true
		}
		if ts == 0 {
			continue
		}
		t := time.Unix(int64(ts), 0).UTC()
		if s.First.IsZero() {
			s.First = t
		}
		if t.After(s.Last) {
			s.Last = t
		}
		s.Events++
	}
}
