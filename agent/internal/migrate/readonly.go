package migrate

import (
	"context"
	"fmt"
	"strings"
	"time"

	"cairn.dev/agent/contract"
	"cairn.dev/agent/internal/config"
	"cairn.dev/agent/internal/engine"
	"cairn.dev/agent/internal/inventory"
)

// Cutover's CAIRN_CUTOVER_SOURCE_READ_ONLY: the writes to the source stop
// (pgReadOnly, myReadOnly) and are allowed again when the cutover fails or
// the migration aborts (revertReadOnly); precheck reports what would make
// it fail (pgReadOnlyChecks, myReadOnlyChecks).

// pgReadOnly makes the source database read-only for new transactions and
// ends the other sessions on it, waiting for each to exit, so no write of
// an old session lands after cutover. set reports whether the database was
// made read-only (the caller undoes it when a later part fails).
// Idempotent.
func (mig *Migration) pgReadOnly(ctx context.Context, sc engine.Conn, res *contract.MigrationResult) (set bool, err error) {
	c, err := inventory.ConnectPostgres(ctx, sc, sc.Database)
	if err != nil {
		return false, fmt.Errorf("source: %w", err)
	}
	defer c.Close(context.WithoutCancel(ctx))
	// A repeated cutover's session starts read-only itself.
	if _, err := c.Exec(ctx, "SET SESSION default_transaction_read_only = off"); err != nil {
		return false, fmt.Errorf("source: %w", err)
	}
	if _, err := c.Exec(ctx, "ALTER DATABASE "+inventory.Ident(sc.Database)+" SET default_transaction_read_only = on"); err != nil {
		return false, fmt.Errorf("make source database %q read-only: %w", sc.Database, err)
	}
	// pg_terminate_backend(pid, timeout) (PostgreSQL 14+) returns once the
	// session has exited: a transaction it was committing is then either
	// in or out, never landing after the comparison that follows.
	var num int
	if err := c.QueryRow(ctx, "SELECT current_setting('server_version_num')::int").Scan(&num); err != nil {
		return true, fmt.Errorf("source: %w", err)
	}
	term := "pg_terminate_backend(pid)"
	if num >= 140000 {
		term = "pg_terminate_backend(pid, 10000)"
	}
	// A session of another role shows backend_type NULL to a user without
	// pg_read_all_stats: it is a session to end too (never skipped
	// silently); ending it fails loudly without the privilege.
	var total, ended int
	if err := c.QueryRow(ctx, `SELECT count(*), count(*) FILTER (WHERE `+term+`)
FROM pg_stat_activity WHERE datname = current_database() AND pid <> pg_backend_pid()
  AND (backend_type = 'client backend' OR backend_type IS NULL)`).Scan(&total, &ended); err != nil {
		return true, fmt.Errorf("end the other sessions on source database %q (needs pg_signal_backend or a superuser): %w", sc.Database, err)
	}
	if ended < total {
		return true, fmt.Errorf("end the other sessions on source database %q: %d of %d did not end", sc.Database, total-ended, total)
	}
	res.Actions = append(res.Actions,
		fmt.Sprintf("source database %q is read-only for new sessions (default_transaction_read_only=on)", sc.Database),
		fmt.Sprintf("ended %d other sessions on it", ended))
	mig.log.Info("source read-only", "database", sc.Database, "endedSessions", ended)
	return true, nil
}

// pgReadOnlyChecks reports, at precheck, what would make cutover's
// sourceReadOnly fail: ALTER DATABASE needs the database's owner (or a
// member of its role) or a superuser; ending the other sessions needs
// pg_signal_backend or a superuser.
func pgReadOnlyChecks(ctx context.Context, d *inventory.Postgres, p *problems) error {
	var owner, signal bool
	err := d.C.QueryRow(ctx, `SELECT r.rolsuper OR pg_has_role(current_user, db.datdba, 'MEMBER'),
  r.rolsuper OR pg_has_role(current_user, 'pg_signal_backend', 'MEMBER')
FROM pg_database db, pg_roles r WHERE db.datname = current_database() AND r.rolname = current_user`).Scan(&owner, &signal)
	if err != nil {
		return fmt.Errorf("source privileges for sourceReadOnly: %w", err)
	}
	if !owner {
		p.add("cutover.sourceReadOnly: source user %q neither owns database %q nor is a superuser, so it cannot make it read-only (ALTER DATABASE)", d.Conn.User, d.Conn.Database)
	}
	if !signal {
		p.add("cutover.sourceReadOnly: source user %q is neither a member of pg_signal_backend nor a superuser, so it cannot end the other sessions on %q at cutover (GRANT pg_signal_backend TO %s)", d.Conn.User, d.Conn.Database, d.Conn.User)
	}
	return nil
}

// myReadOnly makes the source database read-only: MySQL 8.0.22 and newer
// have a per-schema READ ONLY option; MariaDB has none (only the
// server-wide read_only, which would stop every other database too), so
// the step refuses there rather than do something broader than asked.
// set reports whether the schema was made read-only.
func (mig *Migration) myReadOnly(ctx context.Context, sc engine.Conn, res *contract.MigrationResult) (set bool, err error) {
	m, err := inventory.OpenMySQL(ctx, sc)
	if err != nil {
		return false, fmt.Errorf("source: %w", err)
	}
	defer m.Close()
	v, err := m.Version(ctx)
	if err != nil {
		return false, err
	}
	if strings.Contains(strings.ToLower(v), "mariadb") {
		return false, &config.UsageError{Msg: fmt.Sprintf("source is MariaDB %s, which cannot make one database read-only (only the whole server: read_only); stop the writers yourself and cut over without sourceReadOnly, declaring spec.cutover.writersStopped", v)}
	}
	if _, err := m.C.ExecContext(ctx, "ALTER SCHEMA "+inventory.QuoteIdent(sc.Database)+" READ ONLY = 1"); err != nil {
		return false, fmt.Errorf("make source database %q read-only (needs MySQL 8.0.22 or newer): %w", sc.Database, err)
	}
	rows, err := m.C.QueryContext(ctx, "SELECT id FROM information_schema.processlist WHERE db = DATABASE() AND id <> CONNECTION_ID()")
	if err != nil {
		return true, err
	}
	var ids []int64
	for rows.Next() {
		var id int64
		if err := rows.Scan(&id); err == nil {
			ids = append(ids, id)
		}
	}
	rows.Close()
	ended := 0
	for _, id := range ids {
		if _, err := m.C.ExecContext(ctx, fmt.Sprintf("KILL %d", id)); err == nil {
			ended++
		}
	}
	res.Actions = append(res.Actions,
		fmt.Sprintf("source database %q is read-only (ALTER SCHEMA … READ ONLY = 1)", sc.Database),
		fmt.Sprintf("ended %d other sessions on it", ended))
	return true, nil
}

// myReadOnlyChecks reports, at precheck, a source that cutover's
// sourceReadOnly cannot make read-only: MariaDB (no per-database
// read-only) and MySQL older than 8.0.22.
func myReadOnlyChecks(version string, p *problems) {
	if strings.Contains(strings.ToLower(version), "mariadb") {
		p.add("cutover.sourceReadOnly: the source is MariaDB %s, which has no per-database read-only: leave sourceReadOnly false, stop the writers yourself and set spec.cutover.writersStopped", version)
		return
	}
	var maj, mnr, patch int
	fmt.Sscanf(version, "%d.%d.%d", &maj, &mnr, &patch)
	if maj < 8 || maj == 8 && mnr == 0 && patch < 22 {
		p.add("cutover.sourceReadOnly: the source is MySQL %s; a read-only schema needs MySQL 8.0.22 or newer", version)
	}
}

// revertReadOnly makes the source database writable again (what cutover's
// read-only did).
func (mig *Migration) revertReadOnly(ctx context.Context, sc engine.Conn) error {
	ctx, cancel := withTimeout(ctx, cutoverControlTimeout)
	defer cancel()
	switch mig.cfg.Engine {
	case "postgres":
		c, err := inventory.ConnectPostgres(ctx, sc, sc.Database)
		if err != nil {
			return fmt.Errorf("source: %w", err)
		}
		defer c.Close(context.WithoutCancel(ctx))
		// This session starts read-only itself.
		if _, err := c.Exec(ctx, "SET SESSION default_transaction_read_only = off"); err != nil {
			return fmt.Errorf("source: %w", err)
		}
		if _, err := c.Exec(ctx, "ALTER DATABASE "+inventory.Ident(sc.Database)+" RESET default_transaction_read_only"); err != nil {
			return fmt.Errorf("source: %w", err)
		}
		return nil
	case "mysql":
		m, err := inventory.OpenMySQL(ctx, sc)
		if err != nil {
			return fmt.Errorf("source: %w", err)
		}
		defer m.Close()
		v, err := m.Version(ctx)
		if err != nil {
			return err
		}
		if strings.Contains(strings.ToLower(v), "mariadb") {
			return nil // never made read-only (refused)
		}
		if _, err := m.C.ExecContext(ctx, "ALTER SCHEMA "+inventory.QuoteIdent(sc.Database)+" READ ONLY = 0"); err != nil {
			return fmt.Errorf("source: %w", err)
		}
		return nil
	}
	return fmt.Errorf("unknown engine %q", mig.cfg.Engine)
}

// cutoverControlTimeout bounds the statements that undo a cutover.
const cutoverControlTimeout = time.Minute

// withTimeout bounds a short control statement.
func withTimeout(ctx context.Context, d time.Duration) (context.Context, context.CancelFunc) {
	return context.WithTimeout(ctx, d)
}
