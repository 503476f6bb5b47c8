package engine

import (
	"context"
	"encoding/csv"
	"encoding/hex"
	"errors"
	"fmt"
	"strings"
	"time"
)

// Target is what a restore does to its target database besides loading the
// dump: create it when missing (and know whether it did) and drop it when
// it created it. (The verification's queries run through the protocol, in
// package checks, never through psql or mysql.) Postgres and MySQL
// implement it.
type Target interface {
	// CreateTarget creates the target database when it does not exist and
	// reports whether it is the restore's own: created now, or (PostgreSQL)
	// created by an earlier attempt that left marker on it. A non-empty
	// marker is recorded on a database it creates (PostgreSQL: the
	// database's comment), so a retried restore recognises it.
	CreateTarget(ctx context.Context, marker string) (own bool, err error)
	// DropTarget drops the target database if it is the restore's own:
	// (PostgreSQL) it carries marker, re-read just before the drop; without
	// a marker (and on MySQL), created must say this run created it. It
	// never touches any other database.
	DropTarget(ctx context.Context, marker string, created bool) error
}

// createTimeout bounds how long a CREATE DATABASE runs on after its
// restore was stopped (see settled): with the scratch drop's 20 s after it,
// inside the 30 s a pod is given between SIGTERM and SIGKILL. (A CREATE
// held longer than that after the stop — a server-wide read lock — is
// killed as before: the database it may still create is then not known as
// the restore's own.) A restore that is not stopped waits for its CREATE as
// long as the server takes (a large template database to copy, a lock).
var createTimeout = 8 * time.Second

// settled is the context of a CREATE DATABASE: not cancelled with ctx, so
// a restore stopped (SIGTERM: its pod deleted) while the statement runs
// still learns whether the server created the database; it ends
// createTimeout after ctx does. Killing the client at once instead left a
// database the server had created that the restore did not know was its
// own, so it never dropped it (a scratch database left behind on the
// protected server). ctx already done: no statement is sent.
func settled(ctx context.Context) (context.Context, context.CancelFunc, error) {
	if err := ctx.Err(); err != nil {
		return nil, nil, err
	}
	c, cancel := context.WithCancel(context.WithoutCancel(ctx))
	d := createTimeout
	stop := context.AfterFunc(ctx, func() { time.AfterFunc(d, cancel) })
	return c, func() { stop(); cancel() }, nil
}

// ErrNotOwn is returned by DropTarget for a database the restore did not create.
var ErrNotOwn = errors.New("the target database existed before the restore (or lost its marker); it is never dropped")

// psqlArgs are the options of a psql run whose output the agent parses.
func (p *Postgres) psqlArgs(db string) []string {
	return append(p.connArgs(db), "--no-psqlrc", "--tuples-only", "--csv", "--quiet",
		"--set=ON_ERROR_STOP=1", "--pset=null=NULL")
}

// maintenance runs a script in the maintenance database with psql variables
// db (the target's name) and marker set, and returns its CSV output.
func (p *Postgres) maintenance(ctx context.Context, script, marker string) ([][]string, error) {
	var out strings.Builder
	args := append(p.psqlArgs(p.MaintenanceDB), "--set=db="+p.Database, "--set=marker="+marker)
	if err := run(ctx, p.Password, strings.NewReader(script), &out, p.env(), "psql", args...); err != nil {
		return nil, err
	}
	return csv.NewReader(strings.NewReader(out.String())).ReadAll()
}

// comment returns whether the target exists and its comment.
func (p *Postgres) comment(ctx context.Context) (exists bool, comment string, err error) {
	rows, err := p.maintenance(ctx, `SELECT 'exists', coalesce(shobj_description(oid, 'pg_database'), '') FROM pg_database WHERE datname = :'db';`+"\n", "")
	if err != nil {
		return false, "", err
	}
	if len(rows) == 0 {
		return false, "", nil
	}
	if len(rows) != 1 || len(rows[0]) != 2 || rows[0][0] != "exists" {
		return false, "", fmt.Errorf("unexpected answer about database %q: %q", p.Database, rows)
	}
	return true, rows[0][1], nil
}

func (p *Postgres) CreateTarget(ctx context.Context, marker string) (bool, error) {
	exists, comment, err := p.comment(ctx)
	if err != nil {
		return false, err
	}
	if exists {
		return marker != "" && comment == marker, nil
	}
	script := `CREATE DATABASE :"db";` + "\n"
	if marker != "" {
		script += `COMMENT ON DATABASE :"db" IS :'marker';` + "\n"
	}
	cctx, cancel, err := settled(ctx)
	if err != nil {
		return false, err
	}
	defer cancel()
	if _, err := p.maintenance(cctx, script, marker); err != nil {
		return false, fmt.Errorf("create database %q: %w", p.Database, err)
	}
	return true, nil
}

func (p *Postgres) DropTarget(ctx context.Context, marker string, created bool) error {
	exists, comment, err := p.comment(ctx)
	if err != nil {
		return err
	}
	if !exists {
		return nil
	}
	// With a marker, the database must still carry it (re-read just now);
	// without, only a database this run created is the restore's own.
	if marker != "" && comment != marker || marker == "" && !created {
		return ErrNotOwn
	}
	if _, err := p.maintenance(ctx, `DROP DATABASE :"db";`+"\n", ""); err != nil {
		return fmt.Errorf("drop database %q: %w", p.Database, err)
	}
	return nil
}

// oneValue is the value of a result that must have one row and one column.
func oneValue(rows [][]string) (string, error) {
	switch {
	case len(rows) == 0:
		return "", errors.New("the query returned no row; want one row with one column")
	case len(rows) > 1:
		return "", fmt.Errorf("the query returned %d rows; want one row with one column", len(rows))
	case len(rows[0]) != 1:
		return "", fmt.Errorf("the query returned %d columns; want one row with one column", len(rows[0]))
	}
	return rows[0][0], nil
}

// schemaLiteral is a MySQL expression for the string s that needs no
// escaping whatever the server's sql_mode: a hex literal converted to text.
func schemaLiteral(s string) string {
	if s == "" {
		return "''"
	}
	return "CONVERT(0x" + hex.EncodeToString([]byte(s)) + " USING utf8mb4)"
}

// ident quotes a MySQL identifier.
func (m *MySQL) ident() string { return "`" + strings.ReplaceAll(m.Database, "`", "``") + "`" }

// batch runs script with the mysql client in batch mode (no database
// selected) and returns its rows, tab-separated fields unescaped.
func (m *MySQL) batch(ctx context.Context, db, script string) ([][]string, error) {
	var out strings.Builder
	args := append(m.connArgs(), "--connect-timeout=15", "--batch", "--skip-column-names")
	if db != "" {
		args = append(args, "--database="+db)
	}
	if err := run(ctx, m.Password, strings.NewReader(script), &out, m.env(), "mysql", args...); err != nil {
		return nil, err
	}
	if out.Len() == 0 {
		return nil, nil
	}
	var rows [][]string
	for _, line := range strings.Split(strings.TrimSuffix(out.String(), "\n"), "\n") {
		fields := strings.Split(line, "\t")
		for i, f := range fields {
			fields[i] = unescapeBatch(f)
		}
		rows = append(rows, fields)
	}
	return rows, nil
}

// unescapeBatch undoes the mysql client's batch-mode escaping of a field.
func unescapeBatch(s string) string {
	if !strings.Contains(s, `\`) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] != '\\' || i+1 == len(s) {
			b.WriteByte(s[i])
			continue
		}
		i++
		switch s[i] {
		case 'n':
			b.WriteByte('\n')
		case 't':
			b.WriteByte('\t')
		case '0':
			b.WriteByte(0)
		default:
			b.WriteByte(s[i])
		}
	}
	return b.String()
}

func (m *MySQL) exists(ctx context.Context) (bool, error) {
	rows, err := m.batch(ctx, "", "SELECT COUNT(*) FROM information_schema.SCHEMATA WHERE SCHEMA_NAME = "+schemaLiteral(m.Database)+";\n")
	if err != nil {
		return false, err
	}
	v, err := oneValue(rows)
	if err != nil {
		return false, err
	}
	return v != "0", nil
}

// CreateTarget creates the database when it does not exist. MySQL has no
// database comment to carry a marker: only a database created by this very
// run is the restore's own.
func (m *MySQL) CreateTarget(ctx context.Context, _ string) (bool, error) {
	ok, err := m.exists(ctx)
	if err != nil || ok {
		return false, err
	}
	// No IF NOT EXISTS: if another session created it meanwhile, this
	// fails rather than taking a database that is not the restore's own.
	cctx, cancel, err := settled(ctx)
	if err != nil {
		return false, err
	}
	defer cancel()
	if _, err := m.batch(cctx, "", "CREATE DATABASE "+m.ident()+";\n"); err != nil {
		return false, fmt.Errorf("create database %q: %w", m.Database, err)
	}
	return true, nil
}

func (m *MySQL) DropTarget(ctx context.Context, _ string, created bool) error {
	if !created {
		return ErrNotOwn
	}
	// A stopped restore's statement may still hold the database's metadata
	// lock on the server: wait for it at most a few seconds (the caller
	// retries), not the server's default of a year.
	if _, err := m.batch(ctx, "", "SET SESSION lock_wait_timeout = 5;\nDROP DATABASE IF EXISTS "+m.ident()+";\n"); err != nil {
		return fmt.Errorf("drop database %q: %w", m.Database, err)
	}
	return nil
}

var (
	_ Target = (*Postgres)(nil)
	_ Target = (*MySQL)(nil)
)
