package pitr

// What a MySQL/MariaDB point-in-time replay may apply (issue 47, item 4):
// the source database's own changes, nothing else. mariadb-binlog's
// --database keeps a statement by its *default* database, so `USE src;
// TRUNCATE other.t` passes its filter; every statement it lets through is
// checked here before the client gets it. The check reads the decoder's
// output the way the mariadb client splits it (delimiters, quotes,
// comments, versioned comments), so what is checked is what is sent.

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"regexp"
	"strconv"
	"strings"
)

// ErrOutsideSource: the log holds a statement that touches another schema,
// users or grants; a replay applies only the source database's own changes.
var ErrOutsideSource = errors.New("the binary log holds a statement outside the source database")

// StatementPolicy decides whether a decoded statement may be applied:
// From is the source database (as logged), To the target's name; Live,
// when set, says whether a schema exists on the target server (read there
// before the replay). One policy, usable by any replay (issue 51's decoder
// too): Check takes one statement's code and where it was logged.
type StatementPolicy struct {
	From, To string
	Live     map[string]bool
}

// systemSchemas are never the source's.
var systemSchemas = []string{"mysql", "information_schema", "performance_schema", "sys"}

// refusedFirst are statements that change users, grants or the server,
// whatever they name.
var refusedFirst = map[string]string{
	"grant": "grants", "revoke": "grants", "install": "plugins", "uninstall": "plugins",
	"load": "a file load (LOAD DATA/XML)", "shutdown": "the server",
}

// refusedNext are statements refused by their first two words.
var refusedNext = map[[2]string]string{
	{"flush", "privileges"}: "grants", {"change", "master"}: "replication", {"change", "replication"}: "replication",
	{"start", "slave"}: "replication", {"start", "replica"}: "replication", {"start", "all"}: "replication",
	{"stop", "slave"}: "replication", {"stop", "replica"}: "replication", {"stop", "all"}: "replication",
	{"reset", "master"}: "replication", {"reset", "slave"}: "replication", {"reset", "replica"}: "replication",
	{"purge", "binary"}: "replication", {"purge", "master"}: "replication",
}

// refusedObject are CREATE/DROP/ALTER/RENAME objects outside a database,
// and events (statements the target server would run later, on its own).
var refusedObject = map[string]string{
	"user": "users", "role": "users", "database": "schemas", "schema": "schemas", "server": "the server",
	"tablespace": "the server", "logfile": "the server", "event": "scheduled events",
}

// objectPrefix are the words a CREATE/ALTER/DROP may hold before its
// object's kind (OR REPLACE, IF NOT EXISTS, DEFINER = …, ALGORITHM = …,
// SQL SECURITY …).
var objectPrefix = map[string]bool{
	"or": true, "replace": true, "if": true, "not": true, "exists": true, "temporary": true, "online": true,
	"offline": true, "ignore": true, "aggregate": true, "definer": true, "algorithm": true, "sql": true,
	"security": true, "invoker": true, "undefined": true, "merge": true, "temptable": true, "current_user": true,
	"nowait": true, "wait": true,
}

// remoteEngines are storage engines whose tables live on another server
// or in files outside the database.
var remoteEngines = map[string]bool{"federated": true, "federatedx": true, "connect": true, "spider": true}

// Statement is one decoded statement: its tokens, and where it was logged.
type Statement struct {
	Tokens []Token
	// Pos and GTID are from the decoder's event header.
	Pos, GTID string
	// Text is the statement as decoded (for the message).
	Text []byte
}

func (s Statement) where() string {
	w := "at position " + s.Pos
	if s.GTID != "" {
		w += " (GTID " + s.GTID + ")"
	}
	return w
}

// Check returns nil when s may be applied.
func (p StatementPolicy) Check(s Statement) error {
	refuse := func(base error, what string) error {
		return fmt.Errorf("%w: the event %s touches %s: %.120q; a point-in-time replay applies only the source database's own changes, restore refused (restore to a time before it)",
			base, s.where(), what, bytes.TrimSpace(s.Text))
	}
	toks := s.Tokens
	if len(toks) == 0 {
		return nil
	}
	if toks[0].Word("binlog") {
		// A row event: its table map was kept by the decoder's --database
		// (the table's own schema, not the default one) and renamed.
		return nil
	}
	forbidden := func(schema string) (error, bool) {
		l := strings.ToLower(schema)
		for _, sys := range systemSchemas {
			if l == sys {
				return ErrOutsideSource, true
			}
		}
		if p.From != p.To && strings.EqualFold(schema, p.From) {
			return ErrNamesSource, true
		}
		if p.From != p.To && strings.EqualFold(schema, p.To) {
			// The target's name, in the source's log, is another schema
			// of the source's server.
			return ErrOutsideSource, true
		}
		if p.From == p.To && strings.EqualFold(schema, p.To) {
			return nil, false
		}
		for live := range p.Live {
			if strings.EqualFold(live, schema) {
				return ErrOutsideSource, true
			}
		}
		return nil, false
	}
	start := true
	for i, t := range toks {
		switch {
		case t.Kind == tokPunct && t.Text == ";":
			start = true
			continue
		case t.Kind == tokPunct && t.Text == `\`:
			// The client's one command mariadb-binlog writes:
			// /*!\C utf8mb4 */ (a character set), alone.
			if len(toks) == 3 && i == 0 && toks[1].Kind == tokWord && toks[1].Text == "C" && toks[2].Kind == tokWord {
				return nil
			}
			return refuse(ErrOutsideSource, "a client command")
		case start:
			start = false
			if t.Kind != tokWord {
				break
			}
			w := strings.ToLower(t.Text)
			if what, ok := refusedFirst[w]; ok {
				return refuse(ErrOutsideSource, what)
			}
			if i+1 < len(toks) {
				if what, ok := refusedNext[[2]string{w, strings.ToLower(toks[i+1].Text)}]; ok {
					return refuse(ErrOutsideSource, what)
				}
			}
			switch w {
			case "create", "drop", "alter", "rename":
				j := i + 1
				for j < len(toks) && (toks[j].Kind != tokWord || objectPrefix[strings.ToLower(toks[j].Text)]) {
					j++
				}
				if j < len(toks) {
					if what, ok := refusedObject[strings.ToLower(toks[j].Text)]; ok {
						return refuse(ErrOutsideSource, what)
					}
				}
				// A table on another server or in files elsewhere.
				for k := i + 1; k < len(toks); k++ {
					if toks[k].Word("connection") || toks[k].Word("directory") {
						return refuse(ErrOutsideSource, "storage outside the database ("+strings.ToUpper(toks[k].Text)+")")
					}
					if toks[k].Word("engine") {
						e := k + 1
						if e < len(toks) && toks[e].Text == "=" {
							e++
						}
						if e < len(toks) && remoteEngines[strings.ToLower(toks[e].Text)] {
							return refuse(ErrOutsideSource, "storage outside the database (ENGINE="+toks[e].Text+")")
						}
					}
				}
			case "execute", "prepare":
				return refuse(ErrOutsideSource, "dynamic SQL (its text is not checked)")
			case "set":
				if i+1 < len(toks) && (toks[i+1].Word("password") || toks[i+1].Word("default") && i+2 < len(toks) && toks[i+2].Word("role")) {
					return refuse(ErrOutsideSource, "users")
				}
			case "use":
				if i+1 < len(toks) && !strings.EqualFold(toks[i+1].Text, p.To) {
					return refuse(ErrOutsideSource, "another schema")
				}
			case "delimiter":
				return refuse(ErrOutsideSource, "a client command")
			}
		}
		if t.Word("soname") {
			return refuse(ErrOutsideSource, "a server library")
		}
		// schema.object: the first of two or three names joined by dots.
		if (t.Kind == tokWord || t.Kind == tokQuoted) && i+2 < len(toks) && toks[i+1].Kind == tokPunct && toks[i+1].Text == "." &&
			(toks[i+2].Kind == tokWord || toks[i+2].Kind == tokQuoted || toks[i+2].Text == "*") &&
			(i == 0 || toks[i-1].Kind != tokPunct || toks[i-1].Text != ".") && !allDigits(t.Text) {
			if base, bad := forbidden(t.Text); bad {
				return refuse(base, "schema "+strconv.Quote(t.Text))
			}
		}
	}
	return nil
}

func allDigits(s string) bool {
	for _, c := range s {
		if c < '0' || c > '9' {
			return false
		}
	}
	return s != ""
}

// Token kinds.
const (
	tokWord   = iota // a bare word: keyword, name, number
	tokQuoted        // a `name` (or "name" under ANSI_QUOTES: treated alike)
	tokString        // a 'string'
	tokPunct
)

// Token is one lexical token of a statement (comments dropped; the text
// of a versioned comment /*!NNNNN … */ kept as code, as the server runs it).
type Token struct {
	Kind int
	Text string
}

// Word says whether t is the bare word w (case-insensitive).
func (t Token) Word(w string) bool { return t.Kind == tokWord && strings.EqualFold(t.Text, w) }

var (
	headerPos  = regexp.MustCompile(`^# at (\d+)`)
	headerGTID = regexp.MustCompile(`\sGTID (\d+-\d+-\d+)`)
	sqlMode    = regexp.MustCompile(`(?i)@@session\.sql_mode=(\d+)`)
)

// modeNoBackslashEscapes is NO_BACKSLASH_ESCAPES's bit in a numeric
// sql_mode.
const modeNoBackslashEscapes = 1 << 20

// splitter reads mariadb-binlog's output as the mariadb client does:
// statements end at the current delimiter (";", then mariadb-binlog's
// "/*!*/;" after its DELIMITER line) outside quotes and comments.
type splitter struct {
	br          *bufio.Reader
	delim       string
	noBackslash bool
	pos, gtid   string
}

func newSplitter(r io.Reader) *splitter {
	return &splitter{br: bufio.NewReaderSize(r, 1<<20), delim: ";"}
}

// next returns the next statement's raw bytes (comments and the delimiter
// included, as they are sent on) and its tokens; io.EOF at the end.
func (sp *splitter) next() (raw []byte, st Statement, err error) {
	var buf bytes.Buffer
	var toks []Token
	var word strings.Builder
	flush := func() {
		if word.Len() > 0 {
			toks = append(toks, Token{Kind: tokWord, Text: word.String()})
			word.Reset()
		}
	}
	lineStart := true
	for {
		c, err := sp.br.ReadByte()
		if err != nil {
			flush()
			if buf.Len() == 0 {
				return nil, st, io.EOF
			}
			if err == io.EOF {
				err = nil
			}
			st.Tokens, st.Text = toks, buf.Bytes()
			return buf.Bytes(), st, err
		}
		// A DELIMITER line where a statement starts (mariadb-binlog's own).
		if lineStart && len(toks) == 0 && word.Len() == 0 && (c == 'D' || c == 'd') {
			if p, _ := sp.br.Peek(9); len(p) == 9 && strings.EqualFold("D"+string(p[:8]), "DELIMITER") && (p[8] == ' ' || p[8] == '\t') {
				rest, rerr := sp.br.ReadString('\n')
				line := "D" + rest
				buf.WriteString(line)
				nd := strings.TrimSpace(line[len("DELIMITER"):])
				if nd != ";" && nd != "/*!*/;" {
					return nil, st, fmt.Errorf("%w: the decoded log sets the client's delimiter to %q", ErrOutsideSource, nd)
				}
				sp.delim = nd
				st.Text = buf.Bytes()
				return buf.Bytes(), st, rerr
			}
		}
		wasLineStart := lineStart
		lineStart = false
		// The delimiter, outside quotes and comments.
		if c == sp.delim[0] {
			if p, _ := sp.br.Peek(len(sp.delim) - 1); string(p) == sp.delim[1:] {
				sp.br.Discard(len(p))
				buf.WriteByte(c)
				buf.Write([]byte(sp.delim[1:]))
				flush()
				st.Tokens, st.Pos, st.GTID, st.Text = toks, sp.pos, sp.gtid, buf.Bytes()
				if len(toks) > 0 {
					if m := sqlMode.FindStringSubmatch(joinTokens(toks)); m != nil {
						n, _ := strconv.ParseUint(m[1], 10, 64)
						sp.noBackslash = n&modeNoBackslashEscapes != 0
					}
				}
				return buf.Bytes(), st, nil
			}
		}
		buf.WriteByte(c)
		switch {
		case c == '#' || c == '-' && sp.peekIs("- ", "-\t", "-\n", "-\r"):
			flush()
			line, _ := sp.br.ReadString('\n')
			buf.WriteString(line)
			full := string(c) + line
			if m := headerPos.FindStringSubmatch(full); m != nil {
				sp.pos = m[1]
			}
			if m := headerGTID.FindStringSubmatch(full); m != nil && strings.HasPrefix(full, "#") {
				sp.gtid = m[1]
			}
			lineStart = true
		case c == '/' && sp.peekIs("*"):
			flush()
			sp.br.Discard(1)
			buf.WriteByte('*')
			if p, _ := sp.br.Peek(2); len(p) > 0 && (p[0] == '!' || len(p) == 2 && p[0] == 'M' && p[1] == '!') {
				// A versioned comment: its text is code. Its end "*/" is
				// skipped where it appears below.
				n := 1
				if p[0] == 'M' {
					n = 2
				}
				sp.br.Discard(n)
				buf.Write(p[:n])
				for {
					d, _ := sp.br.Peek(1)
					if len(d) == 0 || d[0] < '0' || d[0] > '9' {
						break
					}
					sp.br.Discard(1)
					buf.WriteByte(d[0])
				}
				continue
			}
			// A comment to its end.
			for {
				d, err := sp.br.ReadByte()
				if err != nil {
					break
				}
				buf.WriteByte(d)
				if d == '*' && sp.peekIs("/") {
					sp.br.Discard(1)
					buf.WriteByte('/')
					break
				}
			}
		case c == '*' && sp.peekIs("/"):
			flush()
			sp.br.Discard(1) // the end of a versioned comment
			buf.WriteByte('/')
		case c == '\'' || c == '"' || c == '`':
			flush()
			text := sp.quoted(c, &buf)
			kind := tokQuoted
			if c == '\'' {
				kind = tokString
			}
			toks = append(toks, Token{Kind: kind, Text: text})
		case c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_' || c == '$' || c >= 0x80:
			word.WriteByte(c)
		case c == ' ' || c == '\t':
			flush()
			lineStart = wasLineStart // the client finds a command after leading blanks
		case c == '\r' || c == '\n':
			flush()
			lineStart = c == '\n'
		default:
			flush()
			toks = append(toks, Token{Kind: tokPunct, Text: string(c)})
		}
	}
}

// quoted reads the rest of a quoted string or name opened by q (a doubled
// q is one q; a backslash escapes in strings unless NO_BACKSLASH_ESCAPES).
func (sp *splitter) quoted(q byte, buf *bytes.Buffer) string {
	var text strings.Builder
	for {
		d, err := sp.br.ReadByte()
		if err != nil {
			return text.String()
		}
		buf.WriteByte(d)
		switch {
		case d == '\\' && q != '`' && !sp.noBackslash:
			e, err := sp.br.ReadByte()
			if err != nil {
				return text.String()
			}
			buf.WriteByte(e)
			text.WriteByte(e)
		case d == q:
			if sp.peekIs(string(q)) {
				sp.br.Discard(1)
				buf.WriteByte(q)
				text.WriteByte(q)
				continue
			}
			return text.String()
		default:
			text.WriteByte(d)
		}
	}
}

func (sp *splitter) peekIs(alts ...string) bool {
	for _, a := range alts {
		if p, _ := sp.br.Peek(len(a)); string(p) == a {
			return true
		}
	}
	return false
}

func joinTokens(toks []Token) string {
	var b strings.Builder
	for i, t := range toks {
		if i > 0 && t.Kind != tokPunct && toks[i-1].Kind != tokPunct {
			b.WriteByte(' ')
		}
		b.WriteString(t.Text)
	}
	return b.String()
}
