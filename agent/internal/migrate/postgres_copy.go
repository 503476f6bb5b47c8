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
