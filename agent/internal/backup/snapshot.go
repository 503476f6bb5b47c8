package backup

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"path"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"

	"cairn.dev/agent/internal/engine"
	"cairn.dev/agent/internal/inventory"
	"cairn.dev/agent/internal/naming"
	"cairn.dev/agent/internal/pipeline"
	"cairn.dev/agent/internal/store"
)

// DumpWithInventory streams eng's dump into key (writeArtifact) and takes
// the inventory of the dumped data at the same time:
//
//   - PostgreSQL: a held REPEATABLE READ transaction exports a snapshot;
//     pg_dump reads in it (--snapshot) and so does the inventory, on its
//     own connection, while the dump runs. Both see exactly the same rows.
//   - MySQL/MariaDB cannot share a snapshot between connections. The agent
//     briefly takes FLUSH TABLES WITH READ LOCK (lock_wait_timeout 10 s),
//     starts the inventory's consistent-snapshot transaction, starts
//     mysqldump, and unlocks as soon as mysqldump wrote past its header
//     (it starts its own transaction before it writes anything else) or
//     after at most mysqlLockMax: no commit can fall between the two
//     snapshots, so the inventory is Consistent. Without the RELOAD
//     privilege (or if the lock times out) the two snapshots start a moment
//     apart and the inventory is marked not Consistent.
//
// A PostgreSQL RowCount inventory takes its counts from the dump stream
// instead (dumpCountingRows): no second scan of the tables.
//
// A failed inventory does not fail the dump: invErr says why it is missing.
func (b *Runner) DumpWithInventory(ctx context.Context, eng engine.Engine, conn engine.Conn, st store.Store, key string, o inventory.Options) (w pipeline.Written, inv *inventory.Inventory, invErr, err error) {
	level := b.encoding()
	if e, ok := eng.(*engine.MySQL); ok && naming.Multipart(path.Base(key)) && b.cfg.Parallelism > 1 {
		if w, inv, invErr, err, ok := b.mysqlParallel(ctx, e, conn, st, key, o, level); ok {
			return w, inv, invErr, err
		}
	}
	if e, ok := eng.(*engine.Postgres); ok && naming.Multipart(path.Base(key)) {
		return b.pgParallel(ctx, e, conn, st, key, o, level)
	}
	if o.Method == "None" || o.Method == "" {
		w, err = b.writeArtifact(ctx, eng, st, key, level)
		return w, nil, nil, err
	}
	ictx, cancelInv := context.WithCancel(ctx)
	defer cancelInv()
	done := make(chan struct{})
	switch e := eng.(type) {
	case *engine.Postgres:
		_, snap, release, serr := holdSnapshot(ctx, conn)
		if serr != nil {
			return w, nil, nil, serr
		}
		defer release()
		e.Snapshot = snap
		defer func() { e.Snapshot = "" }()
		o.Snapshot = snap
		if o.Method == inventory.MethodRowCount {
			return b.dumpCountingRows(ctx, e, conn, st, key, o, level)
		}
		go func() {
			defer close(done)
			inv, invErr = inventory.Take(ictx, "postgres", conn, o)
		}()
	case *engine.MySQL:
		m, cerr := inventory.OpenMySQL(ctx, conn)
		if cerr != nil {
			return w, nil, nil, cerr
		}
		defer m.Close()
		unlock, locked := b.mysqlGlobalReadLock(ctx, conn)
		defer unlock()
		if berr := inventory.BeginConsistent(ctx, m.C); berr != nil {
			return w, nil, nil, berr
		}
		consistent := locked
		if locked {
			var once sync.Once
			release := func(inTime bool) {
				once.Do(func() {
					if !inTime {
						consistent = false
						b.log.Warn("mysqldump did not start within the lock's bound; the inventory may differ from the dump", "bound", mysqlLockMax)
					}
					unlock()
				})
			}
			timer := time.AfterFunc(mysqlLockMax, func() { release(false) })
			defer timer.Stop()
			eng = startWatch{Engine: e, started: func() { timer.Stop(); release(true) }}
		}
		if o.Method == inventory.MethodRowCount {
			return b.mysqlDumpCountingRows(ctx, eng, m, st, key, o, level, &consistent)
		}
		go func() {
			defer close(done)
			inv, invErr = m.TakeInTransaction(ictx, o)
			if inv != nil {
				inv.Consistent = consistent
			}
		}()
	default:
		return w, nil, nil, fmt.Errorf("no inventory for engine %s", eng.Name())
	}
	w, err = b.dumpAlongside(ctx, eng, eng, st, key, level, cancelInv, done)
	if err != nil {
		return w, nil, nil, err
	}
	if invErr != nil {
		invErr = fmt.Errorf("inventory: %w", invErr)
		inv = nil
	} else if inv == nil {
		invErr = errors.New("inventory: none taken")
	}
	return w, inv, invErr, nil
}

// holdSnapshot opens a connection whose REPEATABLE READ transaction (tx)
// exports a snapshot; release ends both.
func holdSnapshot(ctx context.Context, conn engine.Conn) (tx pgx.Tx, snap string, release func(), err error) {
	holder, err := inventory.ConnectPostgres(ctx, conn, conn.Database)
	if err != nil {
		return nil, "", nil, err
	}
	if tx, snap, err = inventory.ExportSnapshot(ctx, holder); err != nil {
		holder.Close(context.WithoutCancel(ctx))
		return nil, "", nil, err
	}
	return tx, snap, func() {
		tx.Rollback(context.WithoutCancel(ctx))
		holder.Close(context.WithoutCancel(ctx))
	}, nil
}

// dumpAlongside writes the backup (dump: eng, or a wrapper of it) while an
// inventory runs on its own until done closes: a failed dump cancels the
// inventory; a startWatch eng's lock is released at the latest here (a dump
// too small to flush before it ended).
func (b *Runner) dumpAlongside(ctx context.Context, dump, eng engine.Engine, st store.Store, key string, level pipeline.Encoding, cancelInv func(), done <-chan struct{}) (pipeline.Written, error) {
	w, err := b.writeArtifact(ctx, dump, st, key, level)
	if err != nil {
		cancelInv()
	}
	<-done
	if sw, ok := eng.(startWatch); ok {
		sw.started()
	}
	return w, err
}

// mysqlLockMax bounds how long a backup holds the global read lock.
const mysqlLockMax = 10 * time.Second

// mysqlGlobalReadLock takes FLUSH TABLES WITH READ LOCK on a connection of
// its own; unlock releases it (and is safe to call twice). locked is false
// when the lock could not be had (no RELOAD privilege, a long query in the
// way): the caller goes on without it.
func (b *Runner) mysqlGlobalReadLock(ctx context.Context, conn engine.Conn) (unlock func(), locked bool) {
	pool, c, err := inventory.ConnectMySQL(ctx, conn, conn.Database)
	if err != nil {
		b.log.Warn("no global read lock for a consistent inventory", "error", err)
		return func() {}, false
	}
	var once sync.Once
	unlock = func() {
		once.Do(func() {
			c.ExecContext(context.WithoutCancel(ctx), "UNLOCK TABLES")
			c.Close()
			pool.Close()
		})
	}
	if _, err := c.ExecContext(ctx, "SET SESSION lock_wait_timeout = 10"); err == nil {
		_, err = c.ExecContext(ctx, "FLUSH TABLES WITH READ LOCK")
	}
	if err != nil {
		b.log.Warn("no global read lock for a consistent inventory (needs RELOAD); the inventory's snapshot starts a moment before the dump's", "error", err)
		unlock()
		return func() {}, false
	}
	return unlock, true
}

// startWatch calls started once mysqldump wrote past its header: it writes
// the header, then starts its consistent-snapshot transaction, then the
// rest, so any byte after the header means its snapshot exists.
type startWatch struct {
	engine.Engine
	started func()
}

func (s startWatch) Dump(ctx context.Context, w io.Writer) error {
	return s.Engine.Dump(ctx, &headerWatch{w: w, started: s.started})
}

// mysqldumpHeaderEnd ends the header of MySQL's and MariaDB's mysqldump.
var mysqldumpHeaderEnd = []byte("SQL_NOTES=0 */;\n")

type headerWatch struct {
	w       io.Writer
	started func()
	seen    []byte // the header so far (bounded)
	done    bool
}

func (h *headerWatch) Write(p []byte) (int, error) {
	if !h.done {
		if len(h.seen) < 64<<10 {
			h.seen = append(h.seen, p...)
		}
		if i := bytes.Index(h.seen, mysqldumpHeaderEnd); i >= 0 && len(h.seen) > i+len(mysqldumpHeaderEnd) {
			h.done = true
			h.seen = nil
			h.started()
		}
	}
	return h.w.Write(p)
}

// dumpCountingRows is DumpWithInventory for a PostgreSQL RowCount
// inventory: the row counts are read from the archive while it streams
// through the agent (inventory.ArchiveCounter: the COPY lines of each
// table's data block), so they cost no second scan of the tables on the
// server and say exactly what the artifact holds. After the dump, the
// tables are listed in the dump's snapshot (still held by the caller) and
// matched with the counts. If the stream cannot be read (the reason is
// logged), or a table has no data block in it, that table is counted with
// count(*) in the same snapshot: the inventory is the same, only slower.
func (b *Runner) dumpCountingRows(ctx context.Context, e *engine.Postgres, conn engine.Conn, st store.Store, key string, o inventory.Options, level pipeline.Encoding) (w pipeline.Written, inv *inventory.Inventory, invErr, err error) {
	counter := inventory.NewArchiveCounter()
	w, err = b.writeArtifact(ctx, countingEngine{Engine: e, counter: counter}, st, key, level)
	counts, cerr := counter.Result()
	if err != nil {
		return w, nil, nil, err
	}
	inv, invErr = b.countedInventory(ctx, conn, o, counts.Rows, cerr)
	return w, inv, invErr, nil
}

// countedInventory lists the tables in the dump's snapshot (o.Snapshot,
// still held by the caller) and matches them with the row counts read
// from the dump (rows; cerr: why they could not be read, then every table
// is counted with count(*) in that snapshot, as is a table without a
// data block).
func (b *Runner) countedInventory(ctx context.Context, conn engine.Conn, o inventory.Options, rows map[string]int64, cerr error) (*inventory.Inventory, error) {
	if cerr != nil {
		b.log.Warn("row counts could not be read from the dump; counting each table with count(*) in the dump's snapshot", "reason", cerr)
		rows = nil
	}
	db, err := inventory.OpenPostgres(ctx, conn)
	if err != nil {
		return nil, fmt.Errorf("inventory: %w", err)
	}
	defer db.Close()
	inv, scanned, err := db.TakeCounted(ctx, o, rows)
	if err != nil {
		return nil, fmt.Errorf("inventory: %w", err)
	}
	if cerr == nil && len(scanned) > 0 {
		b.log.Warn("tables without a data block in the dump were counted with count(*)", "tables", scanned)
	}
	return inv, nil
}

// mysqlDumpCountingRows is DumpWithInventory for a MySQL/MariaDB RowCount
// inventory: the row counts are read from mysqldump's SQL while it streams
// through the agent (inventory.SQLDumpCounter: the rows of each table's
// INSERTs), not with a count(*) per table that would scan every table a
// second time while the dump runs. The tables are listed on m's
// connection, whose consistent-snapshot transaction the caller started
// under the global read lock (the listing runs alongside the dump, as the
// full inventory does). A table whose rows the stream did not give (the
// reason is logged) is counted with count(*) in that same snapshot after
// the dump: the inventory is the same, only slower. *consistent is read
// after the dump (the lock's release decides it).
func (b *Runner) mysqlDumpCountingRows(ctx context.Context, eng engine.Engine, m *inventory.MySQL, st store.Store, key string, o inventory.Options, level pipeline.Encoding, consistent *bool) (w pipeline.Written, inv *inventory.Inventory, invErr, err error) {
	ictx, cancelInv := context.WithCancel(ctx)
	defer cancelInv()
	var listed *inventory.Inventory
	var listErr error
	done := make(chan struct{})
	go func() {
		defer close(done)
		lo := o
		lo.Method = inventory.MethodList
		listed, listErr = m.TakeInTransaction(ictx, lo)
	}()
	counter := inventory.NewSQLDumpCounter()
	counter.Unlocked = naming.Multipart(path.Base(key)) // dumped without LOCK TABLES
	w, err = b.dumpAlongside(ctx, countingEngine{Engine: eng, counter: counter}, eng, st, key, level, cancelInv, done)
	if err != nil {
		return w, nil, nil, err
	}
	if listErr != nil {
		return w, nil, fmt.Errorf("inventory: %w", listErr), nil
	}
	counts, cerr := counter.Result()
	if cerr != nil {
		b.log.Warn("row counts could not be read from the dump; counting each table with count(*) in the dump's snapshot", "reason", cerr)
		counts = nil
	}
	inv, scanned, ierr := m.Counted(ctx, listed, counts)
	if ierr != nil {
		return w, nil, fmt.Errorf("inventory: %w", ierr), nil
	}
	if cerr == nil && len(scanned) > 0 {
		b.log.Warn("tables whose rows the dump did not give were counted with count(*)", "tables", scanned)
	}
	inv.Consistent = *consistent
	return w, inv, nil, nil
}

// rowCounter is a dump-stream row counter; it never fails a write.
type rowCounter interface {
	io.Writer
	CloseWithError(error) error
}

// countingEngine passes the dump through counter too.
type countingEngine struct {
	engine.Engine
	counter rowCounter
}

func (c countingEngine) Dump(ctx context.Context, w io.Writer) error {
	err := c.Engine.Dump(ctx, io.MultiWriter(w, c.counter))
	c.counter.CloseWithError(err)
	return err
}
