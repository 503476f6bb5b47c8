package engine

import (
	"context"
	"fmt"
	"io"
	"strings"
)

// Postgres dumps with `pg_dump --format=custom --compress=0` (the agent
// compresses the stream itself, once, with zstd) and restores with
// `pg_restore --single-transaction --exit-on-error --clean --if-exists
// --no-owner --no-privileges`: a failed restore rolls back and leaves the
// target as it was, and objects are owned by the restoring user, so the
// target cluster needs none of the source's roles.
type Postgres struct {
	Conn
	// MaintenanceDB is where Prepare connects to create the target.
	MaintenanceDB string
	// Snapshot, when set, is an exported snapshot (pg_export_snapshot of
	// a transaction the caller holds open) that Dump reads in.
	Snapshot string
	// Select are pg_dump arguments selecting objects (--schema=…,
	// --table=…, --exclude-table=…); empty: the whole database.
	Select []string
}

func (p *Postgres) Name() string   { return "postgres" }
func (p *Postgres) Format() string { return "pg_dump-custom" }

func (p *Postgres) env() []string {
	return childEnv(
		"PGPASSWORD="+p.Password,
		"PGCONNECT_TIMEOUT=15",
		"PGAPPNAME=cairn-agent",
	)
}

// connArgs connects a tool to database db. Every coordinate goes into one
// conninfo string with each value quoted, passed as --dbname=<conninfo>:
// a bare database name with "=" or a postgresql:// prefix would otherwise
// be read by libpq as a connection string of its own (overriding host,
// port, user, and the restore's target), and a value in its own argument
// could be read as an option. Quoted, a value is only ever that value.
func (p *Postgres) connArgs(db string) []string {
	conninfo := "host=" + QuoteConninfo(p.Host) + " port=" + QuoteConninfo(itoa(p.Port)) +
		" user=" + QuoteConninfo(p.User) + " dbname=" + QuoteConninfo(db)
	return []string{"--no-password", "--dbname=" + conninfo}
}

// QuoteConninfo quotes a libpq connection-string value: in single quotes,
// with backslash and single quote escaped by a backslash.
func QuoteConninfo(v string) string {
	return "'" + conninfoEscaper.Replace(v) + "'"
}

var conninfoEscaper = strings.NewReplacer(`\`, `\\`, `'`, `\'`)

func (p *Postgres) Dump(ctx context.Context, w io.Writer) error {
	return p.DumpArgs(ctx, w)
}

// DumpArgs is Dump with extra pg_dump arguments (e.g. --section=pre-data).
func (p *Postgres) DumpArgs(ctx context.Context, w io.Writer, extra ...string) error {
	args := append(p.connArgs(p.Database), "--format=custom", "--compress=0")
	if p.Snapshot != "" {
		args = append(args, "--snapshot="+p.Snapshot)
	}
	args = append(append(args, p.Select...), extra...)
	return run(ctx, p.Password, nil, w, p.env(), "pg_dump", args...)
}

// Prepare creates the target database when it does not exist.
func (p *Postgres) Prepare(ctx context.Context) error {
	var out strings.Builder
	q := `SELECT count(*) FROM pg_database WHERE datname = :'db';` + "\n"
	args := append(p.connArgs(p.MaintenanceDB), "--no-psqlrc", "--tuples-only", "--no-align", "--quiet",
		"--set=ON_ERROR_STOP=1", "--set=db="+p.Database)
	if err := run(ctx, p.Password, strings.NewReader(q), &out, p.env(), "psql", args...); err != nil {
		return err
	}
	if strings.TrimSpace(out.String()) == "1" {
		return nil
	}
	q = `CREATE DATABASE :"db";` + "\n"
	if err := run(ctx, p.Password, strings.NewReader(q), io.Discard, p.env(), "psql", args...); err != nil {
		return fmt.Errorf("create database %q: %w", p.Database, err)
	}
	return nil
}

func (p *Postgres) Restore(ctx context.Context, r io.Reader) error {
	return p.RestoreArgs(ctx, r)
}

// RestoreArgs is Restore with extra pg_restore arguments.
func (p *Postgres) RestoreArgs(ctx context.Context, r io.Reader, extra ...string) error {
	args := append(p.connArgs(p.Database),
		"--single-transaction", "--exit-on-error", "--clean", "--if-exists", "--no-owner", "--no-privileges")
	return run(ctx, p.Password, r, io.Discard, p.env(), "pg_restore", append(args, extra...)...)
}

// PatternQuote quotes a name for a pg_dump --schema/--table pattern: in
// double quotes every character is literal (a double quote is doubled).
func PatternQuote(name string) string { return `"` + strings.ReplaceAll(name, `"`, `""`) + `"` }
