package backup

import (
	"context"
	"fmt"
	"strings"

	"github.com/jackc/pgx/v5"

	"cairn.dev/agent/internal/engine"
	"cairn.dev/agent/internal/inventory"
	"cairn.dev/agent/internal/naming"
	"cairn.dev/agent/internal/parts"
	"cairn.dev/agent/internal/pipeline"
	"cairn.dev/agent/internal/store"
)

// pgParallel is DumpWithInventory for a PostgreSQL multi-part backup
// (CAIRN_PARALLELISM above 1): a held REPEATABLE READ transaction exports
// a snapshot and takes ACCESS SHARE on every table (as pg_dump does for
// its whole run: no TRUNCATE or ALTER can change a table between the
// parts' dumps, which are separate pg_dump runs), then parts.PGBackup
// dumps the parts, CAIRN_PARALLELISM at once, all in that snapshot. The
// inventory reads in the same snapshot (RowCount: counted from the data
// parts as they stream).
func (b *Runner) pgParallel(ctx context.Context, e *engine.Postgres, conn engine.Conn, st store.Store, key string, o inventory.Options, level pipeline.Encoding) (w pipeline.Written, inv *inventory.Inventory, invErr, err error) {
	tx, snap, release, err := holdSnapshot(ctx, conn)
	if err != nil {
		return w, nil, nil, err
	}
	defer release()
	sizes, err := lockTables(ctx, tx)
	if err != nil {
		return w, nil, nil, err
	}
	d := *e
	d.Snapshot = snap
	o.Snapshot = snap
	ictx, cancelInv := context.WithCancel(ctx)
	defer cancelInv()
	done := make(chan struct{})
	switch o.Method {
	case "None", "", inventory.MethodRowCount:
		close(done)
	default:
		go func() {
			defer close(done)
			inv, invErr = inventory.Take(ictx, "postgres", conn, o)
		}()
	}
	ext := naming.ExtPostgres
	if level.Recipients != nil {
		ext += naming.ExtEncrypted
	}
	b.log.Info("dumping in parts", "tables", len(sizes), "parallelism", b.cfg.Parallelism)
	pw, err := parts.PGBackup(ctx, &d, sizes, st, key, key+naming.PartsDirSuffix, level, parts.PGOptions{
		Options:  parts.Options{Parallelism: b.cfg.Parallelism, Extension: ext},
		MinTable: b.cfg.PartSize,
		Count:    o.Method == inventory.MethodRowCount,
	})
	b.written = pw.Index
	if err != nil {
		cancelInv()
		<-done
		return w, nil, nil, err
	}
	<-done
	w = pw.Written
	switch o.Method {
	case "None", "":
		return w, nil, nil, nil
	case inventory.MethodRowCount:
	default:
		if invErr != nil {
			return w, nil, fmt.Errorf("inventory: %w", invErr), nil
		}
		return w, inv, nil, nil
	}
	inv, invErr = b.countedInventory(ctx, conn, o, pw.Rows, pw.CountErr)
	return w, inv, invErr, nil
}

// lockTables takes ACCESS SHARE on every table of the database in tx (not
// the system's) and returns their sizes.
func lockTables(ctx context.Context, tx pgx.Tx) (map[inventory.ArchiveTable]int64, error) {
	rows, err := tx.Query(ctx, `
SELECT n.nspname, c.relname, pg_table_size(c.oid)
FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
WHERE c.relkind IN ('r', 'p') AND n.nspname <> 'information_schema' AND n.nspname !~ '^pg_'
ORDER BY 1, 2`)
	if err != nil {
		return nil, fmt.Errorf("list tables: %w", err)
	}
	defer rows.Close()
	sizes := map[inventory.ArchiveTable]int64{}
	var names []string
	for rows.Next() {
		var t inventory.ArchiveTable
		var size int64
		if err := rows.Scan(&t.Schema, &t.Name, &size); err != nil {
			return nil, err
		}
		sizes[t] = size
		names = append(names, "ONLY "+inventory.QualifiedName(inventory.Table{Schema: t.Schema, Name: t.Name}))
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("list tables: %w", err)
	}
	for len(names) > 0 {
		n := min(len(names), 500)
		if _, err := tx.Exec(ctx, "LOCK TABLE "+strings.Join(names[:n], ", ")+" IN ACCESS SHARE MODE"); err != nil {
			return nil, fmt.Errorf("lock the tables for the backup (ACCESS SHARE, as pg_dump): %w", err)
		}
		names = names[n:]
	}
	return sizes, nil
}
