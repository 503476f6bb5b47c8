package inventory

import (
	"bytes"
	"fmt"
	"strings"
)

// SQLDumpCounter reads a mysqldump SQL stream written to it (MySQL's or
// MariaDB's mysqldump with its default comments and extended inserts, as
// the agent runs it) and counts each table's rows, so that a RowCount
// inventory costs no second scan of the tables and says exactly what the
// artifact holds.
//
// mysqldump writes each table's data as a section:
//
//	-- Dumping data for table `orders`
//	LOCK TABLES `orders` WRITE;
//	/*!40000 ALTER TABLE `orders` DISABLE KEYS */;
//	INSERT INTO `orders` VALUES (1,'a'),(2,'b');
//	/*!40000 ALTER TABLE `orders` ENABLE KEYS */;
//	UNLOCK TABLES;
//
// MySQL writes each INSERT on one line, MariaDB (10.11's mysqldump) puts
// each tuple on a line of its own after "VALUES"; either way an INSERT's
// rows are its parenthesised tuples and it ends with ';'. Outside quoted
// strings a value never holds a parenthesis or a semicolon (numbers, NULL,
// 0x… hex with --hex-blob; strings, dates, BIT and JSON are quoted), so
// the rows of an INSERT are the '(' outside strings between VALUES and
// the ';'. Strings are
// skipped by their quotes: a quote preceded by an odd run of backslashes is
// escaped, and a doubled quote (two ' in a row) is one quote inside the string (the
// NO_BACKSLASH_ESCAPES form). Only INSERTs inside a data section for that
// section's table count; INSERT text elsewhere (trigger and routine bodies)
// is not data. A section with a line the counter does not know is not
// counted at all (Result leaves the table out, so the caller counts it
// another way): a count is either exact or absent.
//
// Write never fails and always consumes all of p.
type SQLDumpCounter struct {
	// Unlocked reads a dump taken with --skip-add-locks (a multi-part
	// backup's): no UNLOCK TABLES ends a data section, the first line
	// that is not an INSERT, a comment or blank does (the table's
	// triggers, the next table's DDL).
	Unlocked bool

	rows map[string]int64
	bad  map[string]bool

	section string // the table whose data section is open, "" when none
	open    bool

	// Line start: the first maxSQLHead bytes of the current line.
	head     []byte
	skipLine bool // the rest of a long line that is not an INSERT

	// Inside an INSERT's values.
	values    bool
	inStr     bool
	bsRun     int  // backslashes just before the current position (in a string)
	quoteEnd  bool // a string's closing quote ended the last write: '' is a doubled quote
	opens     int64
	closes    int64
	closedErr error
}

// maxSQLHead bounds the line start kept: enough for any statement the
// counter reads whole ("INSERT INTO `…` VALUES " with a 64-character name
// of 4-byte characters, doubled backticks).
const maxSQLHead = 1024

// NewSQLDumpCounter starts a counter.
func NewSQLDumpCounter() *SQLDumpCounter {
	return &SQLDumpCounter{rows: map[string]int64{}, bad: map[string]bool{}, head: make([]byte, 0, maxSQLHead)}
}

// Write reads p; it always consumes all of p.
func (c *SQLDumpCounter) Write(p []byte) (int, error) {
	n := len(p)
	for len(p) > 0 {
		switch {
		case c.values:
			p = c.scanValues(p)
		case c.skipLine:
			i := bytes.IndexByte(p, '\n')
			if i < 0 {
				return n, nil
			}
			c.skipLine = false
			p = p[i+1:]
		default:
			i := bytes.IndexByte(p, '\n')
			line := p
			if i >= 0 {
				line = p[:i]
			}
			room := maxSQLHead - len(c.head)
			if len(line) <= room {
				c.head = append(c.head, line...)
				if i < 0 {
					return n, nil
				}
				p = p[i+1:]
				// The line is complete: it may still be a short INSERT.
				if rest, ok := c.insertStart(); ok {
					c.startValues()
					// The statement may go on over the next lines.
					left := c.scanValues(append(rest, '\n'))
					if c.skipLine && len(left) > 0 {
						c.skipLine = false // its ';' ended this line
					}
				} else {
					c.line(c.head)
				}
				c.head = c.head[:0]
				continue
			}
			// A line longer than the head: an INSERT (its values follow)
			// or something to skip.
			c.head = append(c.head, line[:room]...)
			p = p[room:]
			if rest, ok := c.insertStart(); ok {
				c.startValues()
				rest = append([]byte(nil), rest...)
				c.head = c.head[:0]
				c.scanValues(rest)
				continue
			}
			if c.open {
				c.markBad() // a long line in a data section that is not an INSERT
			}
			c.head = c.head[:0]
			c.skipLine = true
		}
	}
	return n, nil
}

// insertStart reports whether the head starts an INSERT into the open
// section's table and returns the bytes after "VALUES".
func (c *SQLDumpCounter) insertStart() ([]byte, bool) {
	const pre = "INSERT INTO "
	if !c.open || !bytes.HasPrefix(c.head, []byte(pre)) {
		return nil, false
	}
	name, rest, ok := backtickName(c.head[len(pre):])
	if !ok || !bytes.HasPrefix(rest, []byte(" VALUES")) {
		return nil, false
	}
	rest = rest[len(" VALUES"):]
	if len(rest) > 0 && rest[0] != ' ' {
		return nil, false
	}
	if name != c.section {
		c.markBad() // rows of another table inside this one's section
		return nil, false
	}
	return rest, true
}

func (c *SQLDumpCounter) startValues() {
	c.values, c.inStr, c.bsRun, c.quoteEnd = true, false, 0, false
	c.opens, c.closes = 0, 0
}

// scanValues reads an INSERT's values until the ';' that ends the
// statement, and returns what follows it with skipLine set: the rest of
// that line is not read.
func (c *SQLDumpCounter) scanValues(p []byte) []byte {
	for len(p) > 0 {
		if c.quoteEnd {
			c.quoteEnd = false
			if p[0] == '\'' { // '' inside a string
				c.inStr, c.bsRun = true, 0
				p = p[1:]
				continue
			}
		}
		if c.inStr {
			q := bytes.IndexByte(p, '\'')
			if q < 0 {
				c.bsRun = trailingBackslashes(p, c.bsRun)
				return nil
			}
			run := trailingBackslashes(p[:q], c.bsRun)
			c.bsRun = 0
			if run%2 == 1 { // an escaped quote
				p = p[q+1:]
				continue
			}
			c.inStr = false
			if q+1 == len(p) {
				c.quoteEnd = true
				return nil
			}
			if p[q+1] == '\'' {
				c.inStr = true
				p = p[q+2:]
				continue
			}
			p = p[q+1:]
			continue
		}
		seg := p
		q := bytes.IndexByte(p, '\'')
		if q >= 0 {
			seg = p[:q]
		}
		if end := bytes.IndexByte(seg, ';'); end >= 0 {
			c.count(seg[:end])
			c.endValues()
			c.skipLine = true
			return p[end+1:]
		}
		c.count(seg)
		if q < 0 {
			return nil
		}
		c.inStr, c.bsRun = true, 0
		p = p[q+1:]
	}
	return nil
}

func (c *SQLDumpCounter) count(seg []byte) {
	c.opens += int64(bytes.Count(seg, []byte{'('}))
	c.closes += int64(bytes.Count(seg, []byte{')'}))
}

func (c *SQLDumpCounter) endValues() {
	c.values = false
	if c.opens != c.closes || c.opens == 0 {
		c.markBad()
		return
	}
	c.rows[c.section] += c.opens
}

// trailingBackslashes is the run of backslashes that ends p; when all of
// p is backslashes, the run continues the previous one.
func trailingBackslashes(p []byte, prev int) int {
	n := 0
	for n < len(p) && p[len(p)-1-n] == '\\' {
		n++
	}
	if n == len(p) {
		return prev + n
	}
	return n
}

// line reads one complete line that is not an INSERT.
func (c *SQLDumpCounter) line(l []byte) {
	const dumping = "-- Dumping data for table "
	if bytes.HasPrefix(l, []byte(dumping)) {
		c.closeSection()
		name, rest, ok := backtickName(l[len(dumping):])
		if !ok || len(bytes.TrimSpace(rest)) > 0 {
			return // a name the counter cannot read: its rows are not counted
		}
		if _, seen := c.rows[name]; seen {
			c.bad[name] = true // two sections for one table
		}
		c.section, c.open = name, true
		c.rows[name] += 0
		return
	}
	if !c.open {
		return
	}
	s := string(bytes.TrimRight(l, "\r"))
	switch {
	case s == "UNLOCK TABLES;":
		c.closeSection()
	case s == "", strings.HasPrefix(s, "--"), strings.HasPrefix(s, "/*!") && strings.HasSuffix(s, "*/;"),
		strings.HasPrefix(s, "LOCK TABLES "), s == "set autocommit=0;", s == "commit;":
	case strings.HasPrefix(s, "INSERT INTO "):
		c.markBad() // an INSERT into another table, or one the counter cannot read
	case c.Unlocked:
		c.closeSection()
	default:
		c.markBad()
	}
}

func (c *SQLDumpCounter) closeSection() { c.section, c.open = "", false }

func (c *SQLDumpCounter) markBad() {
	if c.open {
		c.bad[c.section] = true
	}
}

// backtickName reads a `quoted` identifier (two backticks in a row are one backtick) at the
// start of b and returns it and what follows.
func backtickName(b []byte) (string, []byte, bool) {
	if len(b) < 2 || b[0] != '`' {
		return "", nil, false
	}
	var name []byte
	for i := 1; i < len(b); i++ {
		if b[i] != '`' {
			name = append(name, b[i])
			continue
		}
		if i+1 < len(b) && b[i+1] == '`' {
			name = append(name, '`')
			i++
			continue
		}
		return string(name), b[i+1:], true
	}
	return "", nil, false
}

// CloseWithError ends the stream; err is the dump's error (nil: complete).
func (c *SQLDumpCounter) CloseWithError(err error) error {
	if c.closedErr == nil {
		c.closedErr = err
		switch {
		case err != nil:
		case c.values:
			c.closedErr = fmt.Errorf("the dump ends inside an INSERT statement")
		case len(c.head) > 0 || c.skipLine:
			c.closedErr = fmt.Errorf("the dump ends in the middle of a line")
		}
	}
	return nil
}

// Result returns the row count of each table whose data section the stream
// held and the counter could read, keyed by table name; an error when the
// dump failed or ended inside a statement.
func (c *SQLDumpCounter) Result() (map[string]int64, error) {
	if c.closedErr != nil {
		return nil, c.closedErr
	}
	out := make(map[string]int64, len(c.rows))
	for k, n := range c.rows {
		if !c.bad[k] {
			out[k] = n
		}
	}
	return out, nil
}
