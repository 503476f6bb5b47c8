package backup

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"cairn.dev/agent/internal/engine"
	"cairn.dev/agent/internal/inventory"
	"cairn.dev/agent/internal/naming"
	"cairn.dev/agent/internal/parts"
	"cairn.dev/agent/internal/pipeline"
	"cairn.dev/agent/internal/store"
)

// mysqlParallel is DumpWithInventory for a multi-part MySQL backup with
// CAIRN_PARALLELISM above 1: up to that many mysqldump processes at once,
// each dumping its own tables (the largest tables spread over them; the
// first one dumps everything else too: views, routines, events, tables
// created meanwhile), in one consistent snapshot the way mydumper makes
// one: the agent holds FLUSH TABLES WITH READ LOCK while every mysqldump
// starts its consistent-snapshot transaction (each has once it wrote past
// its header), then unlocks (at most mysqlLockMax later). No commit can
// fall between the snapshots, so the dumps (and the inventory, begun under
// the same lock) see one point in time. Without the RELOAD privilege, or
// with fewer than two tables, ok is false and the caller dumps in one
// stream (one snapshot by construction, its parts still compressed and
// stored in parallel).
func (b *Runner) mysqlParallel(ctx context.Context, e *engine.MySQL, conn engine.Conn, st store.Store, key string, o inventory.Options, level pipeline.Encoding) (w pipeline.Written, inv *inventory.Inventory, invErr, err error, ok bool) {
	if strings.Contains(e.Database, ".") {
		return w, nil, nil, nil, false // --ignore-table=db.table would be ambiguous
	}
	m, err := inventory.OpenMySQL(ctx, conn)
	if err != nil {
		return w, nil, nil, err, true
	}
	defer m.Close()
	groups, err := tableGroups(ctx, m, b.cfg.Parallelism)
	if err != nil || len(groups) < 2 {
		return w, nil, nil, err, err != nil
	}
	unlock, locked := b.mysqlGlobalReadLock(ctx, conn)
	defer unlock()
	if !locked {
		b.log.Warn("backing up in one stream: a parallel dump needs FLUSH TABLES WITH READ LOCK (RELOAD) for one snapshot")
		return w, nil, nil, nil, false
	}
	inventoryWanted := o.Method != "None" && o.Method != ""
	if inventoryWanted {
		if err := inventory.BeginConsistent(ctx, m.C); err != nil {
			return w, nil, nil, err, true
		}
	}
	var consistent atomic.Bool
	consistent.Store(true)
	var once sync.Once
	release := func(inTime bool) {
		once.Do(func() {
			if !inTime {
				consistent.Store(false)
				b.log.Warn("not every mysqldump started within the lock's bound; the dumps may not share one point in time", "bound", mysqlLockMax)
			}
			unlock()
		})
	}
	timer := time.AfterFunc(mysqlLockMax, func() { release(false) })
	defer timer.Stop()
	var started atomic.Int32
	var others []string
	for _, g := range groups[1:] {
		others = append(others, g...)
	}
	engs := make([]engine.Engine, len(groups))
	counters := make([]*inventory.SQLDumpCounter, len(groups))
	for i, g := range groups {
		d := *e
		d.ForParts = true
		if i == 0 {
			d.IgnoreTables = others
		} else {
			d.Tables, d.NoRoutines = g, true
		}
		var de engine.Engine = startWatch{Engine: &d, started: func() {
			if started.Add(1) == int32(len(groups)) {
				timer.Stop()
				release(true)
			}
		}}
		if o.Method == inventory.MethodRowCount {
			counters[i] = inventory.NewSQLDumpCounter()
			counters[i].Unlocked = true
			de = countingEngine{Engine: de, counter: counters[i]}
		}
		engs[i] = de
	}
	b.log.Info("dumping in parallel", "dumps", len(groups), "tables", len(others)+len(groups[0]))

	// The inventory reads in its own snapshot alongside the dumps.
	ictx, cancelInv := context.WithCancel(ctx)
	defer cancelInv()
	done := make(chan struct{})
	var listed *inventory.Inventory
	var listErr error
	go func() {
		defer close(done)
		switch o.Method {
		case inventory.MethodRowCount:
			lo := o
			lo.Method = inventory.MethodList
			listed, listErr = m.TakeInTransaction(ictx, lo)
		case "None", "":
		default:
			listed, listErr = m.TakeInTransaction(ictx, o)
		}
	}()
	ext := naming.ExtMySQL
	if level.Recipients != nil {
		ext += naming.ExtEncrypted
	}
	w, x, err := parts.Backup(ctx, engs, st, key, key+naming.PartsDirSuffix, level, parts.Options{Parallelism: b.cfg.Parallelism, PartSize: b.cfg.PartSize, Extension: ext})
	b.written = x
	release(true) // a dump too small to flush before it ended
	if err != nil {
		cancelInv()
		<-done
		return w, nil, nil, err, true
	}
	<-done
	switch {
	case !inventoryWanted:
		return w, nil, nil, nil, true
	case listErr != nil:
		return w, nil, fmt.Errorf("inventory: %w", listErr), nil, true
	case o.Method != inventory.MethodRowCount:
		listed.Consistent = consistent.Load()
		return w, listed, nil, nil, true
	}
	counts := map[string]int64{}
	for _, c := range counters {
		got, cerr := c.Result()
		if cerr != nil {
			b.log.Warn("row counts could not be read from a dump; counting its tables with count(*) in the dumps' snapshot", "reason", cerr)
			continue
		}
		for t, n := range got {
			counts[t] = n
		}
	}
	inv, scanned, ierr := m.Counted(ctx, listed, counts)
	if ierr != nil {
		return w, nil, fmt.Errorf("inventory: %w", ierr), nil, true
	}
	if len(scanned) > 0 {
		b.log.Warn("tables whose rows the dumps did not give were counted with count(*)", "tables", scanned)
	}
	inv.Consistent = consistent.Load()
	return w, inv, nil, nil, true
}

// tableGroups spreads the database's base tables over up to n dumps by
// size (largest first, each to the smallest group so far); nil for a
// database of fewer than two tables.
func tableGroups(ctx context.Context, m *inventory.MySQL, n int) ([][]string, error) {
	rows, err := m.C.QueryContext(ctx, `SELECT TABLE_NAME, COALESCE(DATA_LENGTH, 0) + COALESCE(INDEX_LENGTH, 0)
FROM information_schema.TABLES WHERE TABLE_SCHEMA = DATABASE() AND TABLE_TYPE = 'BASE TABLE' ORDER BY 2 DESC, 1`)
	if err != nil {
		return nil, fmt.Errorf("list tables: %w", err)
	}
	defer rows.Close()
	type table struct {
		name string
		size int64
	}
	var ts []table
	for rows.Next() {
		var t table
		if err := rows.Scan(&t.name, &t.size); err != nil {
			return nil, err
		}
		ts = append(ts, t)
	}
	if err := rows.Err(); err != nil {
		return nil, err
	}
	k := min(n, len(ts))
	if k < 2 {
		return nil, nil
	}
	groups := make([][]string, k)
	sizes := make([]int64, k)
	for _, t := range ts {
		i := slices.Index(sizes, slices.Min(sizes))
		groups[i] = append(groups[i], t.name)
		sizes[i] += t.size
	}
	return groups, nil
}
