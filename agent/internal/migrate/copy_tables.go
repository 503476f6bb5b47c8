package migrate

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"

	"cairn.dev/agent/internal/inventory"
)

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
