package migrate

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"

	"cairn.dev/agent/contract"
	"cairn.dev/agent/internal/config"
	"cairn.dev/agent/internal/engine"
	"cairn.dev/agent/internal/inventory"
)

// copyStep is the direct transfer.
func (mig *Migration) copyStep(ctx context.Context, res *contract.MigrationResult) error {
	sc, err := mig.source()
	if err != nil {
		return err
	}
	tc, err := mig.target()
	if err != nil {
		return err
	}
	if err := mig.refuseSamePair(ctx, "copy"); err != nil {
		return err
	}
	switch mig.cfg.Engine {
	case "postgres":
		return mig.pgCopy(ctx, sc, tc, res)
	case "mysql":
		return mig.myCopy(ctx, sc, tc, res)
	}
	return fmt.Errorf("unknown engine %q", mig.cfg.Engine)
}

// selectedSourceEngine returns the source's engine with its dump
// restricted to the included objects (and to the schema in SchemaOnly
// mode), and the included tables.
func (mig *Migration) selectedSourceEngine(ctx context.Context, sc engine.Conn) (engine.Engine, []inventory.Table, error) {
	m := mig.cfg.Migrate
	eng, err := engine.New(mig.cfg.Engine, sc)
	if err != nil {
		return nil, nil, &config.UsageError{Msg: "source: " + err.Error()}
	}
	db, err := inventory.Open(ctx, mig.cfg.Engine, sc)
	if err != nil {
		return nil, nil, fmt.Errorf("source: %w", err)
	}
	defer db.Close()
	tables, err := db.Tables(ctx, m.Filter, mig.schemaName())
	if err != nil {
		return nil, nil, fmt.Errorf("source: %w", err)
	}
	if len(tables) == 0 && !m.Filter.Empty() {
		return nil, nil, &config.UsageError{Msg: fmt.Sprintf("no table of source database %q matches include %q exclude %q", sc.Database, m.Include, m.Exclude)}
	}
	switch e := eng.(type) {
	case *engine.Postgres:
		if e.Select, err = pgSelection(ctx, db.(*inventory.Postgres), tables, m.Filter); err != nil {
			return nil, nil, err
		}
		switch {
		case m.Mode == "SchemaOnly":
			e.Select = append(e.Select, "--schema-only")
		case len(e.Select) > 0:
			// Large objects belong to no schema: pg_dump leaves them out
			// of a dump of selected schemas or tables unless asked (-b).
			// The tables' oid columns point at them, so they go too.
			e.Select = append(e.Select, "-b")
		}
	case *engine.MySQL:
		if !m.Filter.Empty() {
			for _, t := range tables {
				e.Tables = append(e.Tables, t.Name)
			}
		}
		e.NoData = m.Mode == "SchemaOnly"
	}
	return eng, tables, nil
}

// tableCopier copies one table on one worker's connections and returns the
// bytes it moved (also when it fails part-way).
type tableCopier func(ctx context.Context, t inventory.Table) (int64, error)

// largestFirst is tables ordered by size, largest first (stable): the long
// copies start first, so the workers finish close together.
func largestFirst(tables []inventory.Table) []inventory.Table {
	order := slices.Clone(tables)
	slices.SortStableFunc(order, func(x, y inventory.Table) int { return int(min(max(y.Bytes-x.Bytes, -1), 1)) })
	return order
}

// copyTables copies tables, largest first, on workers workers, both
// engines' migrations alike: open(ctx, w) opens worker w's connections and
// returns its copier and what closes them. The first error (an open or a
// table's copy) cancels the rest and is returned; every byte moved is added
// to moved. It returns the number of tables copied.
func (mig *Migration) copyTables(ctx context.Context, tables []inventory.Table, workers int, moved *atomic.Int64,
	open func(ctx context.Context, w int) (tableCopier, func(), error)) (int, error) {
	order := largestFirst(tables)
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	next := make(chan inventory.Table)
	var done atomic.Int64
	var wg sync.WaitGroup
	var mu sync.Mutex
	var firstErr error
	fail := func(err error) {
		mu.Lock()
		if firstErr == nil {
			firstErr = err
		}
		mu.Unlock()
		cancel(err)
	}
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			copyTable, closeConns, err := open(ctx, w)
			if err != nil {
				fail(err)
				for range next { // let the feeder finish
				}
				return
			}
			defer closeConns()
			for tbl := range next {
				if ctx.Err() != nil {
					continue
				}
				n, err := copyTable(ctx, tbl)
				moved.Add(n)
				if err != nil {
					fail(fmt.Errorf("copy table %s: %w", tbl.Key(), err))
					continue
				}
				done.Add(1)
				mig.log.Debug("table copied", "table", tbl.Key(), "bytes", n, "connection", w)
			}
		}()
	}
	for _, tbl := range order {
		if ctx.Err() != nil {
			break
		}
		next <- tbl
	}
	close(next)
	wg.Wait()
	if firstErr != nil {
		return int(done.Load()), firstErr
	}
	return int(done.Load()), context.Cause(ctx)
}
