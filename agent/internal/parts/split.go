package parts

import (
	"bytes"
	"errors"
	"fmt"
)

// Sink receives a mysqldump stream sorted by Splitter.
type Sink interface {
	// Preamble is the dump's header (session settings), given once,
	// before anything else.
	Preamble(p []byte) error
	// Write passes bytes of the schema or post phase, or of a data
	// statement of table, or a whole index statement of table
	// (PhaseIndex: its deferred secondary keys).
	Write(phase, table string, p []byte) error
	// StatementEnd follows a data statement's last byte (its newline): a
	// part may end here.
	StatementEnd(table string) error
}

// Splitter sorts the SQL of mysqldump (MySQL's or MariaDB's, run with
// --skip-add-locks --skip-disable-keys, as the agent runs it for a
// multi-part backup) into the phases of Index, without holding more than
// a line head in memory.
//
// mysqldump announces each section with a comment line: "-- Table
// structure for table `t`" and "-- Temporary … structure for view" (schema),
// "-- Dumping data for table `t`" (data), "-- Final view structure …",
// "-- Dumping routines …", "-- Dumping events …" (post). Inside a data
// section, each statement starting with "INSERT INTO " is a data statement,
// read to the end of the line ending in ';' (MariaDB puts an INSERT's
// tuples on lines of their own); the first other statement line
// there (the table's triggers, the footer) starts the post phase. The
// header ends with the line setting SQL_NOTES, after which mysqldump
// starts its snapshot.
type Splitter struct {
	sink Sink

	header   []byte
	inHeader bool
	phase    string
	table    string

	head     []byte // the current line's start
	passLine bool   // passing the rest of a line on to phase
	lineTo   string // the phase of the line being passed

	create []byte // a CREATE TABLE being read, to take its keys out (keys.go)

	inInsert bool
	last     byte // the last byte of the INSERT read so far
	err      error
}

// maxHead is how much of a line start is read to sort the line.
const maxHead = 512

// maxHeader bounds the dump's header.
const maxHeader = 64 << 10

var headerEnd = []byte("SQL_NOTES=0 */;")

// NewSplitter sorts into sink.
func NewSplitter(sink Sink) *Splitter {
	return &Splitter{sink: sink, inHeader: true, phase: PhaseSchema, head: make([]byte, 0, maxHead)}
}

// ErrFormat is wrapped by the errors of a stream the splitter cannot sort.
var ErrFormat = errors.New("mysqldump output not understood")

// Write sorts p; it fails only with the sink's error or ErrFormat.
func (s *Splitter) Write(p []byte) (int, error) {
	if s.err != nil {
		return 0, s.err
	}
	n := len(p)
	for len(p) > 0 && s.err == nil {
		switch {
		case s.inInsert:
			p = s.scanInsert(p)
		case s.passLine:
			i := bytes.IndexByte(p, '\n')
			end := len(p)
			if i >= 0 {
				end = i + 1
				s.passLine = false
			}
			s.emit(s.lineTo, p[:end])
			p = p[end:]
		default:
			i := bytes.IndexByte(p, '\n')
			line := p
			if i >= 0 {
				line = p[:i+1]
			}
			limit := maxHead
			if s.inHeader {
				limit = maxHeader
			}
			if room := limit - len(s.head); len(line) > room {
				line = line[:room]
			}
			s.head = append(s.head, line...)
			p = p[len(line):]
			if s.head[len(s.head)-1] == '\n' || len(s.head) == limit {
				s.sortLine()
			}
		}
	}
	if s.err != nil {
		return 0, s.err
	}
	return n, nil
}

// Close ends the stream: a statement or header cut off is an error.
func (s *Splitter) Close() error {
	if s.err != nil {
		return s.err
	}
	if len(s.head) > 0 {
		s.sortLine()
	}
	s.flushCreate()
	switch {
	case s.err != nil:
		return s.err
	case s.inHeader:
		return fmt.Errorf("%w: the dump ended inside its header", ErrFormat)
	case s.inInsert:
		return fmt.Errorf("%w: the dump ended inside an INSERT of %s", ErrFormat, s.table)
	}
	return s.err
}

func (s *Splitter) fail(err error) {
	if err != nil && s.err == nil {
		s.err = err
	}
}

func (s *Splitter) emit(phase string, p []byte) {
	if s.err == nil && len(p) > 0 {
		t := ""
		if phase == PhaseData {
			t = s.table
		}
		s.fail(s.sink.Write(phase, t, p))
	}
}

// sortLine decides where the line starting with s.head goes.
func (s *Splitter) sortLine() {
	h := s.head
	s.head = s.head[:0]
	complete := h[len(h)-1] == '\n'
	if s.inHeader {
		if len(s.header)+len(h) > maxHeader {
			s.fail(fmt.Errorf("%w: no end of the header in its first %d bytes", ErrFormat, maxHeader))
			return
		}
		s.header = append(s.header, h...)
		if !complete {
			s.fail(fmt.Errorf("%w: a header line longer than %d bytes", ErrFormat, maxHeader))
			return
		}
		if bytes.Contains(h, headerEnd) {
			s.inHeader = false
			s.fail(s.sink.Preamble(s.header))
		}
		return
	}
	line := bytes.TrimRight(h, "\n")
	to := s.phase
	switch {
	case bytes.HasPrefix(line, []byte("-- Table structure for table ")),
		bytes.HasPrefix(line, []byte("-- Temporary table structure for view ")),
		bytes.HasPrefix(line, []byte("-- Temporary view structure for view ")):
		s.phase, to = PhaseSchema, PhaseSchema
	case bytes.HasPrefix(line, []byte("-- Dumping data for table ")):
		s.phase, s.table = PhaseData, string(bytes.TrimPrefix(line, []byte("-- Dumping data for table ")))
		to = PhaseSchema // the comment itself
	case bytes.HasPrefix(line, []byte("-- Final view structure for view ")),
		bytes.HasPrefix(line, []byte("-- Dumping routines for database ")),
		bytes.HasPrefix(line, []byte("-- Dumping events for database ")):
		s.phase, to = PhasePost, PhasePost
	case s.phase == PhaseData && bytes.HasPrefix(line, []byte("INSERT INTO ")):
		s.inInsert, s.last = true, 0
		s.scanInsert(h) // all of h is this statement's (its line ends it)
		return
	case s.phase == PhaseData && (len(bytes.TrimSpace(line)) == 0 || bytes.HasPrefix(line, []byte("--"))):
		to = PhasePost // blank lines and comments between data and what follows
	case s.phase == PhaseData:
		// The table's triggers, or the footer: after every row.
		s.phase, to = PhasePost, PhasePost
	}
	if to == PhaseSchema && s.createLine(h, line, complete) {
		return
	}
	s.emit(to, h)
	if !complete {
		s.passLine, s.lineTo = true, to
	}
}

// createLine holds the lines of a CREATE TABLE until its end, then passes
// it on without its plain secondary keys (deferKeys); it reports whether
// it took the line.
func (s *Splitter) createLine(h, line []byte, complete bool) bool {
	switch {
	case s.create == nil && (!complete || !createStart(line)):
		return false
	case s.create == nil:
		s.create = append([]byte(nil), h...)
	case !complete || len(s.create)+len(h) > maxCreate:
		s.flushCreate() // read no further: passed unchanged
		return false
	default:
		s.create = append(s.create, h...)
	}
	if createEnd(line) {
		stmt := s.create
		s.create = nil
		create, alter := deferKeys(stmt)
		s.emit(PhaseSchema, create)
		if alter != nil && s.err == nil {
			s.fail(s.sink.Write(PhaseIndex, tableOf(stmt), alter))
		}
	}
	return true
}

func (s *Splitter) flushCreate() {
	if s.create != nil {
		s.emit(PhaseSchema, s.create)
		s.create = nil
	}
}

// scanInsert reads an INSERT statement's bytes from p up to its end and
// returns the rest of p. A statement ends with a line ending in ';':
// mysqldump escapes newlines (and carriage returns) inside strings, so a
// newline is never inside a value, and the lines inside an INSERT (MariaDB
// puts each tuple on its own) end in ','. One IndexByte per line: the
// splitter costs next to nothing beside the dump.
func (s *Splitter) scanInsert(p []byte) []byte {
	i := 0
	for {
		j := bytes.IndexByte(p[i:], '\n')
		if j < 0 {
			break
		}
		i += j + 1
		prev := s.last
		if i >= 2 {
			prev = p[i-2]
		}
		if prev == ';' {
			s.emit(PhaseData, p[:i])
			s.inInsert, s.last = false, 0
			s.fail(s.sink.StatementEnd(s.table))
			return p[i:]
		}
	}
	if len(p) > 0 {
		s.last = p[len(p)-1]
	}
	s.emit(PhaseData, p)
	return nil
}
