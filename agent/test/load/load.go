// Package load is a steady write load on a PostgreSQL table, for the tests
// of a Continuous migration (the agent's suite and the e2e): it writes only
// to the server it is given, paced, bounded in time, and measures itself.
package load

import (
	"context"
	"fmt"
	"math/rand/v2"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
)

// Load is a steady write load on a PostgreSQL table with a bigint primary
// key id and an int column v: inserts, updates and deletes in equal
// shares (one row each, on random ids up to the highest one), paced at a
// rate of rows per second over a few connections of its own. It stops by
// itself after at most its duration, and on Stop; it writes only to the
// server it was given (127.0.0.1 in the tests).
type Load struct {
	Table                      string
	Rate                       int
	inserted, updated, deleted atomic.Int64
	errs                       atomic.Int64
	firstErr                   atomic.Value
	cancel                     context.CancelFunc
	wg                         sync.WaitGroup
	start, end                 time.Time
	maxID                      atomic.Int64
}

// LoadStats is what a load did.
type LoadStats struct {
	Inserted, Updated, Deleted, Errors int64
	Seconds                            float64
	// RowsPerSecond is the measured rate: rows written / seconds.
	RowsPerSecond float64
}

func (s LoadStats) String() string {
	return fmt.Sprintf("%d inserted, %d updated, %d deleted in %.1f s: %.0f rows/s measured (%d errors)",
		s.Inserted, s.Updated, s.Deleted, s.Seconds, s.RowsPerSecond, s.Errors)
}

// loadWorkers is how many connections a load writes over.
const loadWorkers = 4

// Start starts writing to table (schema-qualified, quoted as needed)
// at rate rows per second for at most maxRun.
func Start(dsn, table string, rate int, maxRun time.Duration) (*Load, error) {
	ctx, cancel := context.WithTimeout(context.Background(), maxRun)
	l := &Load{Table: table, Rate: rate, cancel: cancel}
	var conns []*pgx.Conn
	for range loadWorkers {
		c, err := pgx.Connect(ctx, dsn)
		if err != nil {
			cancel()
			for _, c := range conns {
				c.Close(context.Background())
			}
			return nil, err
		}
		conns = append(conns, c)
	}
	var maxID int64
	if err := conns[0].QueryRow(ctx, "SELECT coalesce(max(id), 0) FROM "+table).Scan(&maxID); err != nil {
		cancel()
		return nil, err
	}
	l.maxID.Store(maxID)
	ops := make(chan int, rate)
	l.start = time.Now()
	l.wg.Add(1)
	go func() { // the pacer: rate/100 operations every 10 ms
		defer l.wg.Done()
		defer close(ops)
		tick := time.NewTicker(10 * time.Millisecond)
		defer tick.Stop()
		sent := 0
		for {
			select {
			case <-ctx.Done():
				return
			case <-tick.C:
			}
			due := int(time.Since(l.start).Seconds()*float64(rate)) - sent
			for range due {
				select {
				case ops <- sent % 3:
					sent++
				case <-ctx.Done():
					return
				}
			}
		}
	}()
	for _, c := range conns {
		l.wg.Add(1)
		go func() {
			defer l.wg.Done()
			defer c.Close(context.Background())
			for op := range ops {
				// Not ctx: a statement under way when the load stops
				// finishes and is counted (the counts are exact).
				wctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
				l.write(wctx, c, op)
				cancel()
			}
		}()
	}
	return l, nil
}

func (l *Load) write(ctx context.Context, c *pgx.Conn, op int) {
	var err error
	id := rand.Int64N(max(l.maxID.Load(), 1)) + 1
	switch op {
	case 0:
		var newID int64
		err = c.QueryRow(ctx, "INSERT INTO "+l.Table+" (v) VALUES ($1) RETURNING id", rand.Int32()).Scan(&newID)
		if err == nil {
			l.inserted.Add(1)
			for old := l.maxID.Load(); newID > old && !l.maxID.CompareAndSwap(old, newID); old = l.maxID.Load() {
			}
		}
	case 1:
		var tag interface{ RowsAffected() int64 }
		tag, err = c.Exec(ctx, "UPDATE "+l.Table+" SET v = v + 1 WHERE id = $1", id)
		if err == nil {
			l.updated.Add(tag.RowsAffected())
		}
	default:
		var tag interface{ RowsAffected() int64 }
		tag, err = c.Exec(ctx, "DELETE FROM "+l.Table+" WHERE id = $1", id)
		if err == nil {
			l.deleted.Add(tag.RowsAffected())
		}
	}
	if err != nil {
		l.errs.Add(1)
		l.firstErr.CompareAndSwap(nil, err.Error())
	}
}

// Written is how many rows the load has written so far.
func (l *Load) Written() int64 { return l.inserted.Load() + l.updated.Load() + l.deleted.Load() }

// Stop ends the load and returns what it did.
func (l *Load) Stop() LoadStats {
	if l.end.IsZero() {
		l.cancel()
		l.wg.Wait()
		l.end = time.Now()
	}
	s := LoadStats{Inserted: l.inserted.Load(), Updated: l.updated.Load(), Deleted: l.deleted.Load(), Errors: l.errs.Load(),
		Seconds: l.end.Sub(l.start).Seconds()}
	s.RowsPerSecond = float64(s.Inserted+s.Updated+s.Deleted) / s.Seconds
	return s
}

// FirstError is the first write that failed, "" if none.
func (l *Load) FirstError() string {
	if s, ok := l.firstErr.Load().(string); ok {
		return s
	}
	return ""
}

// DSN is a pgx connection string from an agent environment's
// CAIRN_DB_* settings.
func DSN(env []string) string {
	get := func(k string) string {
		for _, kv := range env {
			if v, ok := strings.CutPrefix(kv, k+"="); ok {
				return v
			}
		}
		return ""
	}
	return fmt.Sprintf("host=%s port=%s dbname=%s user=%s password=%s sslmode=disable",
		get("CAIRN_DB_HOST"), get("CAIRN_DB_PORT"), get("CAIRN_DB_NAME"), get("CAIRN_DB_USER"), get("CAIRN_DB_PASSWORD"))
}
