package migrate

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"

	"cairn.dev/agent/internal/engine"
	"cairn.dev/agent/internal/inventory"
)

// recopyChanged copies again into the target the tables named in changed
// (the keys a comparison found different), reading the source in one
// snapshot. It is the Full cutover's way back to copying, run only while
// the source's writes are stopped (read-only, or declared stopped by the
// user), so what it copies is what the source keeps. Each table's rows on
// the target are replaced: emptied and copied again; triggers do not fire
// for the copied rows (the source's trigger-written rows are copied as
// they are). It returns the keys of the tables copied again.
func (mig *Migration) recopyChanged(ctx context.Context, sc, tc engine.Conn, changed []string) ([]string, error) {
	_, selected, err := mig.selectedSourceEngine(ctx, sc)
	if err != nil {
		return nil, err
	}
	var tables []inventory.Table
	for _, t := range selected {
		if slices.Contains(changed, t.Key()) {
			tables = append(tables, t)
		}
	}
	if len(tables) != len(changed) {
		var missing []string
		for _, k := range changed {
			if !slices.ContainsFunc(tables, func(t inventory.Table) bool { return t.Key() == k }) {
				missing = append(missing, k)
			}
		}
		return nil, fmt.Errorf("cannot copy again %s: not an included table of the source now (created, renamed or dropped since verification)", strings.Join(missing, ", "))
	}
	switch mig.cfg.Engine {
	case "postgres":
		err = mig.pgRecopy(ctx, sc, tc, tables, selected)
	case "mysql":
		err = mig.myRecopy(ctx, sc, tc, tables)
	default:
		err = fmt.Errorf("unknown engine %q", mig.cfg.Engine)
	}
	if err != nil {
		return nil, err
	}
	keys := make([]string, len(tables))
	for i, t := range tables {
		keys[i] = t.Key()
	}
	return keys, nil
}

// pgRecopy replaces the rows of tables on the target in one target
// transaction (foreign keys on or to them dropped and added again, which
// validates them; TRUNCATE; user triggers disabled while copying), read from
// one read-only REPEATABLE READ transaction on the source; then the
// sequences are set to the source's values in that snapshot.
func (mig *Migration) pgRecopy(ctx context.Context, sc, tc engine.Conn, tables, selected []inventory.Table) error {
	bg := context.WithoutCancel(ctx)
	s, err := inventory.ConnectPostgres(ctx, sc, sc.Database)
	if err != nil {
		return fmt.Errorf("source: %w", err)
	}
	defer s.Close(bg)
	stx, err := s.BeginTx(ctx, pgx.TxOptions{IsoLevel: pgx.RepeatableRead, AccessMode: pgx.ReadOnly})
	if err != nil {
		return fmt.Errorf("source: %w", err)
	}
	defer stx.Rollback(bg)
	t, err := inventory.ConnectPostgres(ctx, tc, tc.Database)
	if err != nil {
		return fmt.Errorf("target: %w", err)
	}
	defer t.Close(bg)
	ttx, err := t.Begin(ctx)
	if err != nil {
		return fmt.Errorf("target: %w", err)
	}
	defer ttx.Rollback(bg)
	names := make([]string, len(tables))
	for i, tbl := range tables {
		names[i] = inventory.QualifiedName(tbl)
	}
	// Foreign keys on or to the changed tables (order_items → orders while
	// only orders changed) would refuse the TRUNCATE: they are dropped in
	// this transaction and added again after the copy, which validates
	// them against the copied rows.
	type fkey struct{ rel, name, def string }
	var fks []fkey
	rows, err := ttx.Query(ctx, `SELECT conrelid::regclass::text, conname, pg_get_constraintdef(oid) FROM pg_constraint
WHERE contype = 'f' AND (conrelid = ANY($1::text[]::regclass[]) OR confrelid = ANY($1::text[]::regclass[])) ORDER BY 1, 2`, names)
	if err != nil {
		return fmt.Errorf("target: foreign keys of the changed tables: %w", err)
	}
	for rows.Next() {
		var k fkey
		if err := rows.Scan(&k.rel, &k.name, &k.def); err != nil {
			rows.Close()
			return fmt.Errorf("target: %w", err)
		}
		fks = append(fks, k)
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return fmt.Errorf("target: foreign keys of the changed tables: %w", err)
	}
	for _, k := range fks {
		if _, err := ttx.Exec(ctx, "ALTER TABLE "+k.rel+" DROP CONSTRAINT "+inventory.Ident(k.name)); err != nil {
			return fmt.Errorf("target: drop foreign key %s of %s while copying: %w", k.name, k.rel, err)
		}
	}
	if _, err := ttx.Exec(ctx, "TRUNCATE "+strings.Join(names, ", ")); err != nil {
		return fmt.Errorf("target: empty the changed tables: %w", err)
	}
	var withTriggers []string
	for _, n := range names {
		var user int
		if err := ttx.QueryRow(ctx, "SELECT count(*) FROM pg_trigger WHERE tgrelid = $1::regclass AND NOT tgisinternal", n).Scan(&user); err != nil {
			return fmt.Errorf("target: triggers of %s: %w", n, err)
		}
		if user > 0 {
			withTriggers = append(withTriggers, n)
		}
	}
	for _, n := range withTriggers {
		if _, err := ttx.Exec(ctx, "ALTER TABLE "+n+" DISABLE TRIGGER USER"); err != nil {
			return fmt.Errorf("target: disable the triggers of %s while copying: %w", n, err)
		}
	}
	var moved atomic.Int64
	for _, tbl := range tables {
		n, err := pgCopyTable(ctx, s, t, tbl)
		moved.Add(n)
		if err != nil {
			return fmt.Errorf("copy table %s again: %w", tbl.Key(), err)
		}
	}
	for _, n := range withTriggers {
		if _, err := ttx.Exec(ctx, "ALTER TABLE "+n+" ENABLE TRIGGER USER"); err != nil {
			return fmt.Errorf("target: enable the triggers of %s: %w", n, err)
		}
	}
	for _, k := range fks {
		if _, err := ttx.Exec(ctx, "ALTER TABLE "+k.rel+" ADD CONSTRAINT "+inventory.Ident(k.name)+" "+k.def); err != nil {
			return fmt.Errorf("target: add foreign key %s of %s again: %w", k.name, k.rel, err)
		}
	}
	if err := ttx.Commit(ctx); err != nil {
		return fmt.Errorf("target: %w", err)
	}
	if err := pgCopySequences(ctx, stx, tc, selected, mig.cfg.Migrate.Filter); err != nil {
		return err
	}
	mig.log.Info("changed tables copied again", "tables", len(tables), "bytes", moved.Load())
	return nil
}

// myRecopy replaces the rows of tables on the target: their triggers are
// dropped, the tables emptied and copied again from one snapshot of the
// source (as the copy step does: strict mode, foreign key checks off),
// then the source's triggers of those tables are created again — also when
// the copy fails halfway.
func (mig *Migration) myRecopy(ctx context.Context, sc, tc engine.Conn, tables []inventory.Table) (err error) {
	srcs, _, _, closeSrcs, err := mig.mySnapshots(ctx, sc, 1)
	if err != nil {
		return err
	}
	defer closeSrcs()
	pool, t, err := myConnectTarget(ctx, tc)
	if err != nil {
		return fmt.Errorf("target: %w", err)
	}
	defer pool.Close()
	defer t.Close()
	maxStmt, err := myPrepareTarget(ctx, t)
	if err != nil {
		return fmt.Errorf("target: %w", err)
	}
	names := make([]string, len(tables))
	for i, tbl := range tables {
		names[i] = tbl.Name
	}
	var triggers []string
	for _, n := range names {
		rows, err := t.QueryContext(ctx, "SELECT trigger_name FROM information_schema.triggers WHERE trigger_schema = DATABASE() AND event_object_table = ?", n)
		if err != nil {
			return fmt.Errorf("target: triggers of %s: %w", n, err)
		}
		for rows.Next() {
			var tr string
			if err := rows.Scan(&tr); err != nil {
				rows.Close()
				return fmt.Errorf("target: %w", err)
			}
			triggers = append(triggers, tr)
		}
		rows.Close()
		if err := rows.Err(); err != nil {
			return fmt.Errorf("target: %w", err)
		}
	}
	var moved atomic.Int64
	// The triggers come back whatever happens after the first is dropped:
	// a copy that fails halfway (a value the target refuses, the source
	// gone) must not leave the target without them. They are created from
	// the source's definitions, on a context of their own (ctx may be what
	// ended). An error here is added to the copy's.
	dropped := false
	defer func() {
		if !dropped {
			return
		}
		rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Minute)
		defer cancel()
		src := &engine.MySQL{Conn: sc, Tables: names, NoData: true, TriggersOnly: true}
		tgt := &engine.MySQL{Conn: tc}
		if rerr := engine.Pipe(rctx, src.Dump, tgt.Restore, &moved); rerr != nil {
			err = errors.Join(err, fmt.Errorf("target: the triggers %s dropped while copying could not be created again (create them from the source's definitions before using the target): %w",
				strings.Join(triggers, ", "), rerr))
		}
	}()
	for _, tr := range triggers {
		dropped = true
		if _, err := t.ExecContext(ctx, "DROP TRIGGER IF EXISTS "+inventory.QuoteIdent(tr)); err != nil {
			return fmt.Errorf("target: drop trigger %s while copying: %w", tr, err)
		}
	}
	for _, n := range names {
		if _, err := t.ExecContext(ctx, "TRUNCATE TABLE "+inventory.QuoteIdent(n)); err != nil {
			return fmt.Errorf("target: empty table %s: %w", n, err)
		}
		b, err := myCopyTable(ctx, srcs[0], t, n, maxStmt)
		moved.Add(b)
		if err != nil {
			return fmt.Errorf("copy table %s again: %w", n, err)
		}
	}
	mig.log.Info("changed tables copied again", "tables", len(tables), "triggers", len(triggers), "bytes", moved.Load())
	return nil
}
