package migrate

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
	"sync/atomic"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"cairn.dev/agent/contract"
	"cairn.dev/agent/internal/config"
	"cairn.dev/agent/internal/engine"
	"cairn.dev/agent/internal/inventory"
	"cairn.dev/agent/internal/pipeline"
	"cairn.dev/agent/patterns"
)

// pgSelection turns the filter into pg_dump arguments naming exact objects
// (quoted, so nothing in a name acts as a pattern): nothing for an empty
// filter; --schema=… per included schema when every pattern is a schema
// pattern (whole schemas: functions, types, views and sequences too); else
// --table=… per included table.
func pgSelection(ctx context.Context, d *inventory.Postgres, tables []inventory.Table, f *patterns.Filter) ([]string, error) {
	if f.Empty() {
		return nil, nil
	}
	var args []string
	if f.SchemaLevel() {
		rows, err := d.C.Query(ctx, `SELECT nspname FROM pg_namespace
WHERE nspname NOT IN ('pg_catalog', 'information_schema') AND nspname NOT LIKE 'pg\_toast%' AND nspname NOT LIKE 'pg\_temp\_%'
ORDER BY 1`)
		if err != nil {
			return nil, fmt.Errorf("list schemas: %w", err)
		}
		schemas, err := pgx.CollectRows(rows, pgx.RowTo[string])
		if err != nil {
			return nil, fmt.Errorf("list schemas: %w", err)
		}
		for _, s := range schemas {
			if f.Match(s, "") {
				args = append(args, "--schema="+engine.PatternQuote(s))
			}
		}
		if len(args) == 0 {
			return nil, &config.UsageError{Msg: "no schema of the source matches the include/exclude patterns"}
		}
		return args, nil
	}
	for _, t := range tables {
		args = append(args, "--table="+engine.PatternQuote(t.Schema)+"."+engine.PatternQuote(t.Name))
	}
	return args, nil
}

func pgUnreadable(ctx context.Context, d *inventory.Postgres, tables []inventory.Table) ([]string, error) {
	var denied []string
	for _, t := range tables {
		var ok bool
		err := d.C.QueryRow(ctx, "SELECT has_schema_privilege($1, 'USAGE') AND has_table_privilege($2, 'SELECT')",
			t.Schema, inventory.QualifiedName(t)).Scan(&ok)
		if err != nil {
			return nil, err
		}
		if !ok {
			denied = append(denied, t.Key())
		}
	}
	return denied, nil
}

func pgReplicationChecks(ctx context.Context, d *inventory.Postgres, tables []inventory.Table, p *problems) error {
	var wal string
	var canReplicate bool
	if err := d.C.QueryRow(ctx, "SELECT current_setting('wal_level'), rolreplication OR rolsuper FROM pg_roles WHERE rolname = current_user").
		Scan(&wal, &canReplicate); err != nil {
		return fmt.Errorf("source replication settings: %w", err)
	}
	if wal != "logical" {
		p.add("source wal_level is %s: Continuous mode needs wal_level=logical (a server restart)", wal)
	}
	if !canReplicate {
		p.add("source user %q has neither REPLICATION nor SUPERUSER: Continuous mode needs one to create a replication slot", d.Conn.User)
	}
	// Once published, UPDATE and DELETE fail on a table without a replica
	// identity: the source's application would break.
	var none []string
	for _, t := range tables {
		var ok bool
		err := d.C.QueryRow(ctx, `SELECT c.relreplident = 'f' OR (c.relreplident = 'd' AND EXISTS (SELECT 1 FROM pg_index i WHERE i.indrelid = c.oid AND i.indisprimary))
  OR (c.relreplident = 'i' AND EXISTS (SELECT 1 FROM pg_index i WHERE i.indrelid = c.oid AND i.indisreplident))
FROM pg_class c WHERE c.oid = $1::regclass`, inventory.QualifiedName(t)).Scan(&ok)
		if err != nil {
			return fmt.Errorf("source replica identity of %s: %w", t.Key(), err)
		}
		if !ok {
			none = append(none, t.Key())
		}
	}
	p.addNames("source table %s has no primary key or replica identity: once published, UPDATE and DELETE on it would fail (add a primary key, or REPLICA IDENTITY FULL)", none)
	var los int64
	if err := d.C.QueryRow(ctx, "SELECT count(*) FROM pg_largeobject_metadata").Scan(&los); err != nil {
		return fmt.Errorf("source large objects: %w", err)
	}
	if los > 0 {
		p.add("source has %d large objects: logical replication does not carry them (the copy takes them as they are at its start; later changes would be lost): use Full mode", los)
	}
	return nil
}

// pgConnectTarget connects to the target database, or, when it does not
// exist yet, returns exists=false and a connection to "postgres".
func pgConnectTarget(ctx context.Context, tc engine.Conn) (*pgx.Conn, bool, error) {
	c, err := inventory.ConnectPostgres(ctx, tc, tc.Database)
	if err == nil {
		return c, true, nil
	}
	var pe *pgconn.PgError
	if errors.As(err, &pe) && pe.Code == "3D000" || strings.Contains(err.Error(), "SQLSTATE 3D000") {
		c, err2 := inventory.ConnectPostgres(ctx, tc, "postgres")
		if err2 != nil {
			return nil, false, fmt.Errorf("target: %w", err2)
		}
		return c, false, nil
	}
	return nil, false, fmt.Errorf("target: %w", err)
}

func (mig *Migration) pgTargetChecks(ctx context.Context, tc engine.Conn, srcTables []inventory.Table, haveSource bool, p *problems, res *contract.MigrationResult) error {
	c, exists, err := pgConnectTarget(ctx, tc)
	if err != nil {
		return err
	}
	defer c.Close(context.WithoutCancel(ctx))
	if err := c.QueryRow(ctx, "SHOW server_version").Scan(&res.TargetVersion); err != nil {
		return fmt.Errorf("target version: %w", err)
	}
	if !exists {
		var can bool
		if err := c.QueryRow(ctx, "SELECT rolcreatedb OR rolsuper FROM pg_roles WHERE rolname = current_user").Scan(&can); err != nil {
			return fmt.Errorf("target privileges: %w", err)
		}
		if !can {
			p.add("target database %q does not exist and user %q may not create databases", tc.Database, tc.User)
		}
		return nil
	}
	if err := mig.existingTargetTables(ctx, &inventory.Postgres{Conn: tc, C: c}, p); err != nil {
		return err
	}
	// Can the target user create what the copy creates? Try it in a
	// transaction that is rolled back: nothing stays.
	schemas := []string{"public"}
	if haveSource {
		schemas = nil
		for _, t := range srcTables {
			if !slices.Contains(schemas, t.Schema) {
				schemas = append(schemas, t.Schema)
			}
		}
	}
	tx, err := c.Begin(ctx)
	if err != nil {
		return fmt.Errorf("target: %w", err)
	}
	defer tx.Rollback(context.WithoutCancel(ctx))
	for _, s := range schemas {
		if _, err := tx.Exec(ctx, "SAVEPOINT probe"); err != nil {
			return err
		}
		_, err := tx.Exec(ctx, "CREATE SCHEMA IF NOT EXISTS "+inventory.Ident(s))
		if err == nil {
			_, err = tx.Exec(ctx, "CREATE TABLE "+inventory.Ident(s)+".cairn_precheck_probe (id int); INSERT INTO "+
				inventory.Ident(s)+".cairn_precheck_probe VALUES (1)")
		}
		if err != nil {
			p.add("target user %q may not create tables in schema %q of database %q: %v", tc.User, s, tc.Database, err)
		}
		if _, err := tx.Exec(ctx, "ROLLBACK TO SAVEPOINT probe"); err != nil {
			return err
		}
	}
	if mig.cfg.Migrate.Mode == "Continuous" {
		var super bool
		if err := c.QueryRow(ctx, "SELECT rolsuper FROM pg_roles WHERE rolname = current_user").Scan(&super); err != nil {
			return err
		}
		if !super && major(res.TargetVersion) < 16 {
			p.add("target user %q is not a superuser: CREATE SUBSCRIPTION needs one before PostgreSQL 16", tc.User)
		}
	}
	return nil
}

// pgCreateSchemas creates the schemas of tables on the target (a dump of
// selected tables does not create them).
func pgCreateSchemas(ctx context.Context, tc engine.Conn, tables []inventory.Table) error {
	c, err := inventory.ConnectPostgres(ctx, tc, tc.Database)
	if err != nil {
		return fmt.Errorf("target: %w", err)
	}
	defer c.Close(context.WithoutCancel(ctx))
	done := map[string]bool{}
	for _, t := range tables {
		if t.Schema == "" || done[t.Schema] {
			continue
		}
		done[t.Schema] = true
		if _, err := c.Exec(ctx, "CREATE SCHEMA IF NOT EXISTS "+inventory.Ident(t.Schema)); err != nil {
			return fmt.Errorf("target: create schema %s: %w", t.Schema, err)
		}
	}
	return nil
}

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

// pgCopy copies the included objects of the source into the target, all
// read in one exported snapshot of the source: the schema's pre-data
// (pg_dump --section=pre-data piped into pg_restore), then the table data
// in parallel (COPY TO STDOUT → COPY FROM STDIN, per table, on
// CAIRN_MIGRATE_PARALLEL connection pairs), sequence values, then post-data
// (indexes, constraints, triggers). Included tables already on the target
// are dropped first: leftovers of an earlier attempt (precheck refused a
// non-empty target) or replaced on purpose (allowNonEmptyTarget), so a
// retried copy never duplicates rows.
func (mig *Migration) pgCopy(ctx context.Context, sc, tc engine.Conn, res *contract.MigrationResult) error {
	m := mig.cfg.Migrate
	srcEng, tables, err := mig.selectedSourceEngine(ctx, sc)
	if err != nil {
		return err
	}
	src := srcEng.(*engine.Postgres)
	tgtEng, err := engine.New("postgres", tc)
	if err != nil {
		return &config.UsageError{Msg: "target: " + err.Error()}
	}
	tgt := tgtEng.(*engine.Postgres)
	if err := tgt.Prepare(ctx); err != nil {
		return fmt.Errorf("prepare target database %q: %w", tc.Database, err)
	}
	if err := mig.pgReset(ctx, tc, tables, res); err != nil {
		return err
	}
	if !m.Filter.SchemaLevel() {
		if err := pgCreateSchemas(ctx, tc, tables); err != nil {
			return err
		}
	}

	holder, err := inventory.ConnectPostgres(ctx, sc, sc.Database)
	if err != nil {
		return fmt.Errorf("source: %w", err)
	}
	defer holder.Close(context.WithoutCancel(ctx))
	snapTx, snap, err := inventory.ExportSnapshot(ctx, holder)
	if err != nil {
		return fmt.Errorf("source: %w", err)
	}
	defer snapTx.Rollback(context.WithoutCancel(ctx))
	src.Snapshot = snap
	mig.log.Info("copy started", "tables", len(tables), "snapshot", snap, "parallel", m.Parallel)

	var moved atomic.Int64
	section := func(name string) error {
		err := engine.Pipe(ctx,
			func(ctx context.Context, w io.Writer) error { return src.DumpArgs(ctx, w, "--section="+name) },
			func(ctx context.Context, r io.Reader) error { return tgt.RestoreArgs(ctx, r, "--section="+name) },
			&moved)
		if err != nil {
			return fmt.Errorf("%s: %w", name, err)
		}
		return nil
	}
	if err := section("pre-data"); err != nil {
		return err
	}
	mig.log.Info("schema created (pre-data)")
	// SchemaOnly copies no rows; neither does Continuous, whose rows come
	// from the subscription's initial synchronisation (replication-start).
	if m.Mode == "Full" {
		if err := mig.pgCopyData(ctx, sc, tc, snap, tables, &moved, res); err != nil {
			return err
		}
		if err := pgCopySequences(ctx, snapTx, tc, tables, m.Filter); err != nil {
			return err
		}
	}
	if m.Mode != "SchemaOnly" {
		// Continuous too: logical replication does not carry large
		// objects (precheck says so); the target gets them as of the copy.
		if err := mig.pgCopyLargeObjects(ctx, sc, tc, snap, &moved, res); err != nil {
			return err
		}
	}
	if err := section("post-data"); err != nil {
		return err
	}
	res.Tables = len(tables)
	res.TablesDone = len(tables)
	res.Bytes = moved.Load()
	return nil
}

// pgReset drops the tables about to be copied that are already on the
// target (CASCADE: their indexes, constraints, and views over them go too;
// the pre-data section recreates what the source has). Tables only on the
// target are left alone.
func (mig *Migration) pgReset(ctx context.Context, tc engine.Conn, copying []inventory.Table, res *contract.MigrationResult) error {
	c, err := inventory.ConnectPostgres(ctx, tc, tc.Database)
	if err != nil {
		return fmt.Errorf("target: %w", err)
	}
	defer c.Close(context.WithoutCancel(ctx))
	existing, err := (&inventory.Postgres{Conn: tc, C: c}).Tables(ctx, mig.cfg.Migrate.Filter, "")
	if err != nil {
		return fmt.Errorf("target: %w", err)
	}
	var names []string
	for _, t := range existing {
		if slices.ContainsFunc(copying, func(c inventory.Table) bool { return c.Key() == t.Key() }) {
			names = append(names, inventory.QualifiedName(t))
		}
	}
	if len(names) == 0 {
		return nil
	}
	if _, err := c.Exec(ctx, "DROP TABLE IF EXISTS "+strings.Join(names, ", ")+" CASCADE"); err != nil {
		return fmt.Errorf("target: drop included tables of an earlier attempt: %w", err)
	}
	res.Actions = append(res.Actions, fmt.Sprintf("dropped %d of the copied tables that were already on the target before copying", len(names)))
	mig.log.Warn("dropped copied tables already on the target", "tables", len(names))
	return nil
}

func (mig *Migration) pgCopyData(ctx context.Context, sc, tc engine.Conn, snap string, tables []inventory.Table, moved *atomic.Int64, res *contract.MigrationResult) error {
	workers := max(1, min(mig.cfg.Migrate.Parallel, len(tables)))
	copied, err := mig.copyTables(ctx, tables, workers, moved, func(ctx context.Context, _ int) (tableCopier, func(), error) {
		bg := context.WithoutCancel(ctx)
		s, err := inventory.ConnectPostgres(ctx, sc, sc.Database)
		if err != nil {
			return nil, nil, fmt.Errorf("source: %w", err)
		}
		t, err := inventory.ConnectPostgres(ctx, tc, tc.Database)
		if err != nil {
			s.Close(bg)
			return nil, nil, fmt.Errorf("target: %w", err)
		}
		tx, err := inventory.BeginInSnapshot(ctx, s, snap)
		if err != nil {
			t.Close(bg)
			s.Close(bg)
			return nil, nil, fmt.Errorf("source: %w", err)
		}
		closeConns := func() {
			_ = tx.Rollback(bg)
			t.Close(bg)
			s.Close(bg)
		}
		return func(ctx context.Context, tbl inventory.Table) (int64, error) {
			return pgCopyTable(ctx, s, t, tbl)
		}, closeConns, nil
	})
	res.TablesDone = copied
	return err
}

// pgCopyTable streams one table: COPY … TO STDOUT on the source (inside
// its snapshot transaction) into COPY … FROM STDIN on the target, text
// format (safe across major versions). Generated columns are left out on
// both ends by COPY itself.
func pgCopyTable(ctx context.Context, s, t *pgx.Conn, tbl inventory.Table) (int64, error) {
	name := inventory.QualifiedName(tbl)
	pr, pw := io.Pipe()
	var n int64
	srcErr := make(chan error, 1)
	go func() {
		// COPY TO writes one row per Write: buffer them, so the pipe hands
		// the target large chunks instead of switching goroutines per row
		// (16.1 → 1.6 CPU seconds per GB in make bench-migration).
		bw := bufio.NewWriterSize(pw, 256<<10)
		cw := &pipeline.CountingWriter{W: bw}
		_, err := s.PgConn().CopyTo(ctx, cw, "COPY "+name+" TO STDOUT")
		if err == nil {
			err = bw.Flush()
		}
		n = cw.N
		pw.CloseWithError(err)
		srcErr <- err
	}()
	_, err := t.PgConn().CopyFrom(ctx, pr, "COPY "+name+" FROM STDIN")
	pr.CloseWithError(errors.New("target COPY ended"))
	serr := <-srcErr
	if serr != nil {
		return n, fmt.Errorf("source: %w", serr)
	}
	if err != nil {
		return n, fmt.Errorf("target: %w", err)
	}
	return n, nil
}

// pgCopySequences sets the target's sequences in the included schemas to
// the source's values in the copy's snapshot.
func pgCopySequences(ctx context.Context, snapTx pgx.Tx, tc engine.Conn, tables []inventory.Table, f *patterns.Filter) error {
	rows, err := snapTx.Query(ctx, `SELECT n.nspname, c.relname FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
WHERE c.relkind = 'S' AND n.nspname NOT IN ('pg_catalog', 'information_schema') ORDER BY 1, 2`)
	if err != nil {
		return fmt.Errorf("source sequences: %w", err)
	}
	type seq struct {
		schema, name string
		last         int64
		called       bool
	}
	var seqs []seq
	for rows.Next() {
		var s seq
		if err := rows.Scan(&s.schema, &s.name); err != nil {
			rows.Close()
			return err
		}
		seqs = append(seqs, s)
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return err
	}
	schemas := map[string]bool{}
	for _, t := range tables {
		schemas[t.Schema] = true
	}
	var keep []seq
	for _, s := range seqs {
		if !schemas[s.schema] && !(f.SchemaLevel() && f.Match(s.schema, "")) {
			continue
		}
		name := inventory.Ident(s.schema) + "." + inventory.Ident(s.name)
		if err := snapTx.QueryRow(ctx, "SELECT last_value, is_called FROM "+name).Scan(&s.last, &s.called); err != nil {
			return fmt.Errorf("source sequence %s: %w", name, err)
		}
		keep = append(keep, s)
	}
	if len(keep) == 0 {
		return nil
	}
	c, err := inventory.ConnectPostgres(ctx, tc, tc.Database)
	if err != nil {
		return fmt.Errorf("target: %w", err)
	}
	defer c.Close(context.WithoutCancel(ctx))
	for _, s := range keep {
		name := inventory.Ident(s.schema) + "." + inventory.Ident(s.name)
		var exists bool
		if err := c.QueryRow(ctx, "SELECT to_regclass($1) IS NOT NULL", name).Scan(&exists); err != nil {
			return err
		}
		if !exists {
			continue
		}
		if _, err := c.Exec(ctx, "SELECT setval($1::regclass, $2, $3)", name, s.last, s.called); err != nil {
			return fmt.Errorf("target sequence %s: %w", name, err)
		}
	}
	return nil
}

// pgLOChunk is how much of a large object one round trip moves.
const pgLOChunk = 1 << 20

// pgCopyLargeObjects copies the contents of the source's large objects,
// read in the copy's snapshot, into the target's objects of the same OID.
// The pre-data section created them (pg_dump includes large objects in a
// whole-database dump and, with -b, in a dump of selected objects; its
// --clean replaces those an earlier attempt left). Data moves in chunks of
// pgLOChunk (lo_get → lo_put), committed every 64 MiB.
func (mig *Migration) pgCopyLargeObjects(ctx context.Context, sc, tc engine.Conn, snap string, moved *atomic.Int64, res *contract.MigrationResult) error {
	s, err := inventory.ConnectPostgres(ctx, sc, sc.Database)
	if err != nil {
		return fmt.Errorf("source: %w", err)
	}
	defer s.Close(context.WithoutCancel(ctx))
	stx, err := inventory.BeginInSnapshot(ctx, s, snap)
	if err != nil {
		return fmt.Errorf("source: %w", err)
	}
	defer stx.Rollback(context.WithoutCancel(ctx))
	oids, err := inventory.LargeObjects(ctx, stx)
	if err != nil {
		return fmt.Errorf("source: %w", err)
	}
	if len(oids) == 0 {
		return nil
	}
	t, err := inventory.ConnectPostgres(ctx, tc, tc.Database)
	if err != nil {
		return fmt.Errorf("target: %w", err)
	}
	defer t.Close(context.WithoutCancel(ctx))
	var ttx pgx.Tx
	pending := 0
	var total int64
	for _, oid := range oids {
		if ttx == nil {
			if ttx, err = t.Begin(ctx); err != nil {
				return fmt.Errorf("target: %w", err)
			}
			defer func(tx pgx.Tx) { tx.Rollback(context.WithoutCancel(ctx)) }(ttx)
		}
		// Normally there already (pre-data); created when not.
		if _, err := ttx.Exec(ctx, "SELECT lo_create($1) WHERE NOT EXISTS (SELECT 1 FROM pg_largeobject_metadata WHERE oid = $1)", oid); err != nil {
			return fmt.Errorf("target: large object %d: %w", oid, err)
		}
		for off := int64(0); ; off += pgLOChunk {
			var data []byte
			if err := stx.QueryRow(ctx, "SELECT lo_get($1, $2, $3)", oid, off, pgLOChunk).Scan(&data); err != nil {
				return fmt.Errorf("source: large object %d: %w", oid, err)
			}
			if len(data) > 0 {
				if _, err := ttx.Exec(ctx, "SELECT lo_put($1, $2, $3)", oid, off, data); err != nil {
					return fmt.Errorf("target: large object %d: %w", oid, err)
				}
			}
			moved.Add(int64(len(data)))
			total += int64(len(data))
			pending += len(data)
			if len(data) < pgLOChunk {
				break
			}
		}
		if pending >= 64<<20 {
			if err := ttx.Commit(ctx); err != nil {
				return fmt.Errorf("target: %w", err)
			}
			ttx, pending = nil, 0
		}
	}
	if ttx != nil {
		if err := ttx.Commit(ctx); err != nil {
			return fmt.Errorf("target: %w", err)
		}
	}
	res.Actions = append(res.Actions, fmt.Sprintf("copied %d large objects (%d bytes)", len(oids), total))
	mig.log.Info("large objects copied", "count", len(oids), "bytes", total)
	return nil
}
