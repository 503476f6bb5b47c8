package migrate

import (
	"context"
	"database/sql"
	"fmt"
	"strings"
	"sync/atomic"

	"cairn.dev/agent/contract"
	"cairn.dev/agent/internal/config"
	"cairn.dev/agent/internal/engine"
	"cairn.dev/agent/internal/inventory"
)

// The MySQL/MariaDB direct copy, rows in parallel (the mydumper approach):
//
//  1. schema: mysqldump --no-data --skip-triggers (tables with their
//     indexes and constraints, views, routines, events) piped into mysql;
//     each table is dropped and recreated, so a retry starts clean;
//  2. rows: one connection takes FLUSH TABLES WITH READ LOCK, the
//     CAIRN_MIGRATE_PARALLEL source connections each START TRANSACTION
//     WITH CONSISTENT SNAPSHOT, the binary log position is recorded, and
//     the lock is released (milliseconds; writes wait for that long). All
//     snapshots are the same point in time: no commit can fall between
//     them. Then each connection copies whole tables, largest first: a
//     streamed SELECT into multi-row INSERTs on a target connection of its
//     own (foreign key and unique checks off, as in a mysqldump file);
//  3. triggers: mysqldump --no-create-info --no-data --triggers, after the
//     rows so that they did not fire for copied rows.
//
// Without the RELOAD privilege (or when the lock waits longer than
// lock_wait_timeout for a long statement) the rows are copied on one
// connection, in one snapshot, and the result's actions say so.

// myCopy copies the included tables: Full mode in parallel
// (myCopyParallel); SchemaOnly streams mysqldump --no-data into the mysql
// client on the target. The schema dump drops and recreates each table it
// contains, so a retried copy replaces what an earlier attempt left: no
// duplicate rows.
func (mig *Migration) myCopy(ctx context.Context, sc, tc engine.Conn, res *contract.MigrationResult) error {
	srcEng, tables, err := mig.selectedSourceEngine(ctx, sc)
	if err != nil {
		return err
	}
	tgt, err := engine.New("mysql", tc)
	if err != nil {
		return &config.UsageError{Msg: "target: " + err.Error()}
	}
	if err := tgt.Prepare(ctx); err != nil {
		return fmt.Errorf("prepare target database %q: %w", tc.Database, err)
	}
	mig.log.Info("copy started", "tables", len(tables), "parallel", mig.cfg.Migrate.Parallel)
	if mig.cfg.Migrate.Mode == "Full" {
		return mig.myCopyParallel(ctx, srcEng.(*engine.MySQL), tgt.(*engine.MySQL), tables, res)
	}
	var moved atomic.Int64
	if err := engine.Pipe(ctx, srcEng.Dump, tgt.Restore, &moved); err != nil {
		return err
	}
	res.Tables, res.TablesDone, res.Bytes = len(tables), len(tables), moved.Load()
	return nil
}

// myCopyParallel is the Full copy.
func (mig *Migration) myCopyParallel(ctx context.Context, src, tgt *engine.MySQL, tables []inventory.Table, res *contract.MigrationResult) error {
	var moved atomic.Int64
	schema := *src
	schema.NoData, schema.SkipTriggers = true, true
	if err := engine.Pipe(ctx, schema.Dump, tgt.Restore, &moved); err != nil {
		return fmt.Errorf("schema: %w", err)
	}
	mig.log.Info("schema created (tables, views, routines, events)")
	if err := mig.myCopyRows(ctx, src.Conn, tgt.Conn, tables, &moved, res); err != nil {
		return err
	}
	trig := *src
	trig.NoData, trig.TriggersOnly = true, true
	if err := engine.Pipe(ctx, trig.Dump, tgt.Restore, &moved); err != nil {
		return fmt.Errorf("triggers: %w", err)
	}
	res.Tables, res.Bytes = len(tables), moved.Load()
	return nil
}

// mySnapshots opens n source connections whose transactions all see one
// point in time. With n > 1 it needs FLUSH TABLES WITH READ LOCK; when
// that is refused it returns one connection and the reason.
func (mig *Migration) mySnapshots(ctx context.Context, sc engine.Conn, n int) (conns []*sql.Conn, position, fallback string, closeAll func(), err error) {
	var pools []*sql.DB
	closeAll = func() {
		for _, c := range conns {
			c.ExecContext(context.WithoutCancel(ctx), "ROLLBACK")
			c.Close()
		}
		for _, p := range pools {
			p.Close()
		}
	}
	open := func() error {
		pool, c, err := inventory.ConnectMySQL(ctx, sc, sc.Database)
		if err != nil {
			return fmt.Errorf("source: %w", err)
		}
		pools, conns = append(pools, pool), append(conns, c)
		// Values as the server stores them (no conversion to the
		// connection's character set): the INSERTs label them with the
		// column's own character set.
		if _, err := c.ExecContext(ctx, "SET SESSION character_set_results = binary"); err != nil {
			return fmt.Errorf("source: %w", err)
		}
		return nil
	}
	begin := func() error {
		for _, c := range conns {
			if err := inventory.BeginConsistent(ctx, c); err != nil {
				return fmt.Errorf("source: %w", err)
			}
		}
		return nil
	}
	fail := func(e error) ([]*sql.Conn, string, string, func(), error) {
		closeAll()
		return nil, "", "", func() {}, e
	}
	// Connected before the lock: writes wait only for the BEGINs.
	for range n {
		if err := open(); err != nil {
			return fail(err)
		}
	}
	if n > 1 {
		lockPool, lock, lerr := inventory.ConnectMySQL(ctx, sc, sc.Database)
		if lerr != nil {
			return fail(fmt.Errorf("source: %w", lerr))
		}
		defer lockPool.Close()
		defer lock.Close()
		if _, lerr = lock.ExecContext(ctx, "SET SESSION lock_wait_timeout = 10"); lerr == nil {
			_, lerr = lock.ExecContext(ctx, "FLUSH TABLES WITH READ LOCK")
		}
		if lerr == nil {
			err := begin()
			if err == nil {
				position = myBinlogPosition(ctx, lock)
			}
			lock.ExecContext(context.WithoutCancel(ctx), "UNLOCK TABLES")
			if err != nil {
				return fail(err)
			}
			return conns, position, "", closeAll, nil
		}
		fallback = fmt.Sprintf("FLUSH TABLES WITH READ LOCK was refused (%v; it needs the RELOAD privilege and no statement running longer than lock_wait_timeout): rows copied on one connection, in one snapshot, without parallelism",
			engine.Redact(lerr.Error(), sc.Password))
		mig.log.Warn("no global read lock: copying rows on one connection", "error", lerr)
		for _, c := range conns[1:] {
			c.Close()
		}
		for _, p := range pools[1:] {
			p.Close()
		}
		conns, pools = conns[:1], pools[:1]
	}
	if err := begin(); err != nil {
		return fail(err)
	}
	// No position: without the lock it would not be the snapshot's.
	return conns, "", fallback, closeAll, nil
}

// myBinlogPosition describes the source's binary log position (and GTID
// position) at the snapshot, for a later change-data-capture step; empty
// when the binary log is off or the user may not see it.
func myBinlogPosition(ctx context.Context, c *sql.Conn) string {
	var pos string
	for _, q := range []string{"SHOW MASTER STATUS", "SHOW BINARY LOG STATUS"} {
		rows, err := c.QueryContext(ctx, q)
		if err != nil {
			continue
		}
		cols, _ := rows.Columns()
		if rows.Next() && len(cols) >= 2 {
			vals := make([]sql.NullString, len(cols))
			ptrs := make([]any, len(cols))
			for i := range vals {
				ptrs[i] = &vals[i]
			}
			if rows.Scan(ptrs...) == nil {
				pos = "binary log " + vals[0].String + ":" + vals[1].String
				for i, name := range cols {
					if strings.EqualFold(name, "Executed_Gtid_Set") && vals[i].String != "" {
						pos += " GTID " + strings.ReplaceAll(vals[i].String, "\n", "")
					}
				}
			}
		}
		rows.Close()
		break
	}
	var gtid sql.NullString
	if c.QueryRowContext(ctx, "SELECT @@gtid_binlog_pos").Scan(&gtid) == nil && gtid.String != "" {
		pos += " GTID " + gtid.String // MariaDB
	}
	return strings.TrimSpace(pos)
}

func (mig *Migration) myCopyRows(ctx context.Context, sc, tc engine.Conn, tables []inventory.Table, moved *atomic.Int64, res *contract.MigrationResult) error {
	workers := max(1, min(mig.cfg.Migrate.Parallel, len(tables)))
	srcs, position, fallback, closeSrcs, err := mig.mySnapshots(ctx, sc, workers)
	if err != nil {
		return err
	}
	defer closeSrcs()
	workers = len(srcs)
	switch {
	case fallback != "":
		res.Actions = append(res.Actions, fallback)
	case workers == 1:
		res.Actions = append(res.Actions, "rows copied on one connection, in one snapshot")
	default:
		res.Actions = append(res.Actions, fmt.Sprintf("rows copied on %d connections in one snapshot (FLUSH TABLES WITH READ LOCK held while they started)", workers))
	}
	if position != "" {
		res.Actions = append(res.Actions, "source snapshot at "+position)
	}
	mig.log.Info("copying rows", "tables", len(tables), "connections", workers, "position", position)
	copied, err := mig.copyTables(ctx, tables, workers, moved, func(ctx context.Context, w int) (tableCopier, func(), error) {
		pool, t, err := myConnectTarget(ctx, tc)
		if err != nil {
			return nil, nil, fmt.Errorf("target: %w", err)
		}
		closeConns := func() { t.Close(); pool.Close() }
		maxStmt, err := myPrepareTarget(ctx, t)
		if err != nil {
			closeConns()
			return nil, nil, fmt.Errorf("target: %w", err)
		}
		return func(ctx context.Context, tbl inventory.Table) (int64, error) {
			return myCopyTable(ctx, srcs[w], t, tbl.Name, maxStmt)
		}, closeConns, nil
	})
	res.TablesDone = copied
	return err
}
