package cli

import (
	"context"
	"errors"
	"fmt"

	"cairn.dev/agent/internal/engine"
	"cairn.dev/agent/internal/inventory"
	"cairn.dev/agent/internal/pipeline"
	"cairn.dev/agent/internal/store"
)

// dumpWithInventory streams eng's dump into key (pipeline.Backup) and takes
// the inventory of the dumped data at the same time:
//
//   - PostgreSQL: a held REPEATABLE READ transaction exports a snapshot;
//     pg_dump reads in it (--snapshot) and so does the inventory, on its
//     own connection, while the dump runs. Both see exactly the same rows.
//   - MySQL/MariaDB: the inventory's consistent-snapshot transaction starts
//     just before mysqldump starts its own; rows written between the two
//     starts can differ, so the inventory is marked not Consistent.
//
// A failed inventory does not fail the dump: invErr says why it is missing.
func (a *app) dumpWithInventory(ctx context.Context, eng engine.Engine, conn engine.Conn, st store.Store, key string, o inventory.Options) (w pipeline.Written, inv *inventory.Inventory, invErr, err error) {
	level := pipeline.Level(a.cfg.Compression)
	if o.Method == "None" || o.Method == "" {
		w, err = pipeline.Backup(ctx, eng, st, key, level)
		return w, nil, nil, err
	}
	ictx, cancelInv := context.WithCancel(ctx)
	defer cancelInv()
	done := make(chan struct{})
	switch e := eng.(type) {
	case *engine.Postgres:
		holder, cerr := inventory.ConnectPostgres(ctx, conn, conn.Database)
		if cerr != nil {
			return w, nil, nil, cerr
		}
		defer holder.Close(context.WithoutCancel(ctx))
		tx, snap, serr := inventory.ExportSnapshot(ctx, holder)
		if serr != nil {
			return w, nil, nil, serr
		}
		defer tx.Rollback(context.WithoutCancel(ctx))
		e.Snapshot = snap
		defer func() { e.Snapshot = "" }()
		o.Snapshot = snap
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
		if berr := inventory.BeginConsistent(ctx, m.C); berr != nil {
			return w, nil, nil, berr
		}
		go func() {
			defer close(done)
			inv, invErr = m.TakeInTransaction(ictx, o)
			if inv != nil {
				inv.Consistent = false
			}
		}()
	default:
		return w, nil, nil, fmt.Errorf("no inventory for engine %s", eng.Name())
	}
	w, err = pipeline.Backup(ctx, eng, st, key, level)
	if err != nil {
		cancelInv()
	}
	<-done
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
