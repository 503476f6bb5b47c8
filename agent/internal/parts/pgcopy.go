package parts

import (
	"bufio"
	"bytes"
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"strconv"
	"strings"

	"cairn.dev/agent/internal/engine"
	"cairn.dev/agent/internal/inventory"
)

// pgCopyData loads a large table's data part straight over the protocol:
// the agent reads the part's archive itself and sends the table's rows
// as COPY … FROM STDIN on its own connection, in one transaction that
// first empties the table (TRUNCATE, as pg_restore --jobs does: the rows
// go to a new file of the transaction) and sets the table's sequences
// after the rows. No pg_restore or psql process, no SQL script: measured
// (docs/benchmarks.md) to cost less CPU per byte than pg_restore --file=-
// into psql, on a machine the load keeps busy.
//
// It commits only after the archive's clean end: the stream it reads
// holds back the artifact's last bytes until their checksum matched
// (pipeline.HoldBack), so a broken or corrupted part fails the COPY or
// the check of its end, and the transaction rolls back. The server must
// have stored exactly the rows sent.
//
// The part's table of contents must be exactly what the backup writes for
// one table (pgCopyPlan); anything else — another encoding than UTF8, an
// entry of another kind, a statement in another form — loads with
// pg_restore (pgTruncData), fed the bytes already read.
type pgCopyData struct {
	*engine.Postgres
	table inventory.Table
	log   *slog.Logger
}

// maxReplay bounds what the agent keeps of a part's beginning while it
// reads the table of contents, to hand it to pg_restore if the part is not
// one it loads itself.
const maxReplay = 16 << 20

func (d pgCopyData) Restore(ctx context.Context, r io.Reader) error {
	rec := &replay{r: r}
	ar, err := inventory.OpenArchive(bufio.NewReaderSize(rec, 256<<10))
	var plan pgCopyPlan
	if err == nil {
		plan, err = newPGCopyPlan(ar.Entries, d.table)
	}
	if err != nil {
		if rec.over {
			return fmt.Errorf("data part of %s: its table of contents is larger than %d MiB", inventory.QualifiedName(d.table), maxReplay>>20)
		}
		d.log.Info("loading the part with pg_restore", "table", d.table.Key(), "reason", err.Error())
		return pgTruncData{Postgres: d.Postgres, table: inventory.QualifiedName(d.table)}.Restore(ctx, io.MultiReader(bytes.NewReader(rec.buf), r))
	}
	rec.stop()
	conn, err := inventory.ConnectPostgres(ctx, d.Conn, d.Database)
	if err != nil {
		return err
	}
	defer conn.Close(context.WithoutCancel(ctx))
	// pg_restore's session settings (its _doSetFixedOutputState): names
	// are qualified, row security refuses instead of filtering, no
	// timeout cuts a long load, xml values are read as content.
	session := `SET search_path = ''; SET row_security = off; SET xmloption = content;
SET statement_timeout = 0; SET lock_timeout = 0; SET idle_in_transaction_session_timeout = 0;
SET standard_conforming_strings = on; SET client_encoding = 'UTF8'; SET client_min_messages = warning;
BEGIN; TRUNCATE TABLE ONLY ` + inventory.QualifiedName(d.table)
	if _, err := conn.PgConn().Exec(ctx, session).ReadAll(); err != nil {
		return fmt.Errorf("begin the load of %s: %w", d.table.Key(), err)
	}
	id, rows, err := ar.Next()
	if err == nil && id != plan.data {
		err = fmt.Errorf("a data block of entry %d, not of the table's (%d)", id, plan.data)
	}
	if err != nil {
		return fmt.Errorf("data part of %s: %w", d.table.Key(), err)
	}
	tag, err := conn.PgConn().CopyFrom(ctx, rows, plan.copy)
	if err != nil {
		return fmt.Errorf("load %s: %w", d.table.Key(), err)
	}
	if tag.RowsAffected() != rows.Rows {
		return fmt.Errorf("load %s: the server stored %d of the %d rows sent", d.table.Key(), tag.RowsAffected(), rows.Rows)
	}
	// As pg_restore would (the other tables' part sets every sequence
	// too, to the same values: pg_dump --exclude-table-data keeps them).
	for _, s := range plan.seqs {
		if _, err := conn.Exec(ctx, "SELECT pg_catalog.setval($1::regclass, $2, $3)", s.name, s.value, s.called); err != nil {
			return fmt.Errorf("set sequence %s: %w", s.name, err)
		}
	}
	if _, _, err := ar.Next(); err != io.EOF {
		return fmt.Errorf("data part of %s after its rows: %w", d.table.Key(), cmp.Or(err, errors.New("another block")))
	}
	if _, err := conn.Exec(ctx, "COMMIT"); err != nil {
		return fmt.Errorf("commit the load of %s: %w", d.table.Key(), err)
	}
	d.log.Info("table loaded over the protocol", "table", d.table.Key(), "rows", rows.Rows)
	return nil
}

// replay keeps what was read from r until stop (at most maxReplay bytes).
type replay struct {
	r       io.Reader
	buf     []byte
	stopped bool
	over    bool
}

func (c *replay) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	if !c.stopped {
		if len(c.buf)+n > maxReplay {
			c.over = true
			c.stop()
		} else {
			c.buf = append(c.buf, p[:n]...)
		}
	}
	return n, err
}

func (c *replay) stop() { c.stopped, c.buf = true, nil }

// pgCopyPlan is what a large table's data part holds, read from its table
// of contents: the COPY statement to send (the agent's, with the names
// from the archive's quoted anew) and the sequences to set.
type pgCopyPlan struct {
	data int64 // the TABLE DATA entry
	copy string
	seqs []pgSeqSet
}

type pgSeqSet struct {
	name   string // the qualified name, as regclass reads it
	value  int64
	called bool
}

// newPGCopyPlan accepts exactly what pg_dump --section=data --table=t
// writes: UTF8, the session entries, the database's entries (which
// pg_restore --data-only skips), t's TABLE DATA, and SEQUENCE SET entries
// of the usual form.
func newPGCopyPlan(entries []inventory.ArchiveEntry, t inventory.Table) (pgCopyPlan, error) {
	var plan pgCopyPlan
	utf8 := false
	for _, e := range entries {
		switch e.Desc {
		case "ENCODING":
			if e.Defn != "SET client_encoding = 'UTF8';\n" {
				return plan, fmt.Errorf("the archive's encoding is not UTF8 (%q)", strings.TrimSpace(e.Defn))
			}
			utf8 = true
		case "STDSTRINGS", "SEARCHPATH":
		case "DATABASE", "DATABASE PROPERTIES":
			// pg_dump writes them into every archive; pg_restore
			// --data-only skips them (they are schema).
		case "TABLE DATA":
			if plan.data != 0 || !e.HasData || e.Schema != t.Schema || e.Tag != t.Name {
				return plan, fmt.Errorf("table data of %s.%s in the part of %s", e.Schema, e.Tag, t.Key())
			}
			schema, name, cols, err := parseCopyStmt(e.CopyStmt)
			if err != nil {
				return plan, err
			}
			if schema != t.Schema || name != t.Name {
				return plan, fmt.Errorf("COPY statement of %s.%s in the part of %s", schema, name, t.Key())
			}
			plan.data = e.ID
			plan.copy = "COPY " + inventory.QualifiedName(t)
			if len(cols) > 0 {
				for i, c := range cols {
					cols[i] = inventory.Ident(c)
				}
				plan.copy += " (" + strings.Join(cols, ", ") + ")"
			}
			plan.copy += " FROM STDIN"
		case "SEQUENCE SET":
			s, err := parseSetval(e.Defn)
			if err != nil {
				return plan, err
			}
			plan.seqs = append(plan.seqs, s)
		default:
			return plan, fmt.Errorf("a %s entry", e.Desc)
		}
	}
	if !utf8 || plan.data == 0 {
		return plan, errors.New("no UTF8 encoding entry or no table data")
	}
	return plan, nil
}

// parseCopyStmt reads pg_dump's "COPY schema.table (col, …) FROM stdin;\n"
// (names as fmtId writes them: bare lower-case words or double-quoted).
func parseCopyStmt(s string) (schema, name string, cols []string, err error) {
	bad := fmt.Errorf("a COPY statement of another form (%.80q)", s)
	rest, ok := strings.CutPrefix(s, "COPY ")
	if !ok {
		return "", "", nil, bad
	}
	if schema, rest, ok = cutIdent(rest); !ok || !strings.HasPrefix(rest, ".") {
		return "", "", nil, bad
	}
	if name, rest, ok = cutIdent(rest[1:]); !ok || !strings.HasPrefix(rest, " ") {
		return "", "", nil, bad
	}
	rest = rest[1:]
	if strings.HasPrefix(rest, "(") {
		rest = rest[1:]
		for {
			var c string
			if c, rest, ok = cutIdent(rest); !ok {
				return "", "", nil, bad
			}
			cols = append(cols, c)
			if r, more := strings.CutPrefix(rest, ", "); more {
				rest = r
				continue
			}
			if rest, ok = strings.CutPrefix(rest, ")"); !ok {
				return "", "", nil, bad
			}
			break
		}
	}
	if rest != " FROM stdin;\n" {
		return "", "", nil, bad
	}
	return schema, name, cols, nil
}

// cutIdent reads one identifier as pg_dump's fmtId writes it.
func cutIdent(s string) (ident, rest string, ok bool) {
	if strings.HasPrefix(s, `"`) {
		var b strings.Builder
		for i := 1; i < len(s); i++ {
			if s[i] != '"' {
				b.WriteByte(s[i])
				continue
			}
			if i+1 < len(s) && s[i+1] == '"' {
				b.WriteByte('"')
				i++
				continue
			}
			return b.String(), s[i+1:], b.Len() > 0
		}
		return "", "", false
	}
	i := 0
	for i < len(s) && (s[i] >= 'a' && s[i] <= 'z' || s[i] >= '0' && s[i] <= '9' || s[i] == '_') {
		i++
	}
	return s[:i], s[i:], i > 0
}

// parseSetval reads pg_dump's "SELECT pg_catalog.setval('name', 42, true);\n".
func parseSetval(s string) (pgSeqSet, error) {
	bad := fmt.Errorf("a SEQUENCE SET statement of another form (%.80q)", s)
	rest, ok := strings.CutPrefix(s, "SELECT pg_catalog.setval('")
	if !ok {
		return pgSeqSet{}, bad
	}
	var name strings.Builder
	for {
		i := strings.IndexByte(rest, '\'')
		if i < 0 {
			return pgSeqSet{}, bad
		}
		name.WriteString(rest[:i])
		rest = rest[i+1:]
		if !strings.HasPrefix(rest, "'") {
			break
		}
		name.WriteByte('\'')
		rest = rest[1:]
	}
	rest, ok = strings.CutPrefix(rest, ", ")
	num, rest, ok2 := strings.Cut(rest, ", ")
	v, err := strconv.ParseInt(num, 10, 64)
	if !ok || !ok2 || err != nil || name.Len() == 0 {
		return pgSeqSet{}, bad
	}
	switch rest {
	case "true);\n":
		return pgSeqSet{name: name.String(), value: v, called: true}, nil
	case "false);\n":
		return pgSeqSet{name: name.String(), value: v}, nil
	}
	return pgSeqSet{}, bad
}
