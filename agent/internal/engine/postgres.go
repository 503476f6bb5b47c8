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
	// Options, when set, are the sessions' startup options (PGOPTIONS).
	Options string
}

func (p *Postgres) Name() string   { return "postgres" }
func (p *Postgres) Format() string { return "pg_dump-custom" }

func (p *Postgres) env() []string {
	env := childEnv(
		"PGPASSWORD="+p.Password,
		"PGCONNECT_TIMEOUT=15",
		"PGAPPNAME=cairn-agent",
	)
	if p.Options != "" {
		env = append(env, "PGOPTIONS="+p.Options)
	}
	return env
}

// connArgs connects a tool to database db. Every coordinate goes into one
// conninfo string with each value quoted, passed as --dbname=<conninfo>:
// a bare database name with "=" or a postgresql:// prefix would otherwise
// be read by libpq as a connection string of its own (overriding host,
// port, user, and the restore's target), and a value in its own argument
// could be read as an option. Quoted, a value is only ever that value.
func (p *Postgres) connArgs(db string) []string {
	conninfo := "host=" + QuoteConninfo(p.Host) + " port=" + QuoteConninfo(itoa(p.Port)) +
		" user=" + QuoteConninfo(p.User) + " dbname=" + QuoteConninfo(db) + ToolsNoCleartext()
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
	if needsScriptRestore() {
		return p.restoreViaScript(ctx, r, append([]string{"--clean", "--if-exists"}, extra...)...)
	}
	args := append(p.connArgs(p.Database),
		"--single-transaction", "--exit-on-error", "--clean", "--if-exists", "--no-owner", "--no-privileges")
	return run(ctx, p.Password, r, io.Discard, p.env(), "pg_restore", append(args, extra...)...)
}

// PatternQuote quotes a name for a pg_dump --schema/--table pattern: in
// double quotes every character is literal (a double quote is doubled).
func PatternQuote(name string) string { return `"` + strings.ReplaceAll(name, `"`, `""`) + `"` }

// RestoreData loads a data-only archive (a data part of a multi-part
// artifact: rows and sequence values, no DDL) read from r as one
// transaction: pg_restore's COMMIT follows the archive's last byte.
func (p *Postgres) RestoreData(ctx context.Context, r io.Reader) error {
	args := append(p.connArgs(p.Database),
		"--single-transaction", "--exit-on-error", "--no-owner", "--no-privileges", "--data-only")
	return run(ctx, p.Password, r, io.Discard, p.env(), "pg_restore", args...)
}

// RestoreFile restores the archive in file with `pg_restore --jobs=jobs`
// (extra selects, e.g. --section=post-data): each object commits on its
// own, so only into a database the restore created and drops on failure.
func (p *Postgres) RestoreFile(ctx context.Context, file string, jobs int, extra ...string) error {
	args := append(p.connArgs(p.Database), "--exit-on-error", "--no-owner", "--no-privileges",
		"--jobs="+itoa(max(jobs, 1)))
	args = append(append(args, extra...), "--", file)
	return run(ctx, p.Password, nil, io.Discard, p.env(), "pg_restore", args...)
}

// Script writes the archive read from r as SQL to w (pg_restore
// --file=-, no connection; extra: e.g. --clean --if-exists, --data-only).
// pg_restore brackets the script in \restrict KEY … \unrestrict KEY: psql
// runs no meta-command in between, whatever the archive's names hold.
func (p *Postgres) Script(ctx context.Context, r io.Reader, w io.Writer, extra ...string) error {
	args := append([]string{"--file=-", "--no-owner", "--no-privileges"}, extra...)
	return run(ctx, "", r, w, childEnv(), "pg_restore", args...)
}

// RunScript runs the SQL read from r with psql in one transaction
// (--single-transaction, ON_ERROR_STOP): it commits only when r ends
// cleanly (io.EOF). A read error of r kills psql before its input closes
// (run), so the server rolls the transaction back.
func (p *Postgres) RunScript(ctx context.Context, r io.Reader) error {
	args := append(p.connArgs(p.Database), "--no-psqlrc", "--single-transaction", "--quiet",
		"--set=ON_ERROR_STOP=1")
	return run(ctx, p.Password, r, io.Discard, p.env(), "psql", args...)
}
