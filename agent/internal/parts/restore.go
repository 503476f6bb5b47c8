package parts

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"path"
	"slices"
	"strings"
	"sync"
	"sync/atomic"

	"cairn.dev/agent/contract"
	"cairn.dev/agent/internal/crypt"
	"cairn.dev/agent/internal/engine"
	"cairn.dev/agent/internal/pipeline"
	"cairn.dev/agent/internal/store"
)

// maxIndex bounds the index read (a 1 TB dump in 32 MiB parts: ~10 MB).
const maxIndex = 64 << 20

// ReadIndex reads the index stored under key and checks it against the
// size and checksum the manifest recorded (a mismatch wraps
// pipeline.ErrCorrupted).
func ReadIndex(ctx context.Context, st store.Store, key string, size int64, sum string) (*Index, error) {
	rc, err := st.Get(ctx, key)
	if err != nil {
		return nil, err
	}
	defer rc.Close()
	data, err := io.ReadAll(io.LimitReader(rc, maxIndex+1))
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", st.Path(key), err)
	}
	h := sha256.Sum256(data)
	got := pipeline.ChecksumPrefix + hex.EncodeToString(h[:])
	switch {
	case int64(len(data)) != size:
		return nil, fmt.Errorf("%w: parts index %s has %d bytes, the catalog recorded %d", pipeline.ErrCorrupted, st.Path(key), len(data), size)
	case got != sum:
		return nil, fmt.Errorf("%w: parts index %s has checksum %s, the catalog recorded %s", pipeline.ErrCorrupted, st.Path(key), got, sum)
	}
	x, err := Decode(data)
	if err != nil {
		return nil, fmt.Errorf("%w: %s: %v", pipeline.ErrCorrupted, st.Path(key), err)
	}
	return x, nil
}

// Check makes sure, before anything is written, that every part is stored
// with its recorded size (one listing of dir; a missing or cut part wraps
// pipeline.ErrCorrupted), and that the schema parts are whole (read and
// checked; decrypted with ids).
func Check(ctx context.Context, st store.Store, dir string, x *Index, ids *crypt.Identities) error {
	objs, err := st.List(ctx, dir)
	if err != nil {
		return err
	}
	sizes := map[string]int64{}
	for _, o := range objs {
		sizes[path.Base(o.Key)] = o.Size
	}
	for _, p := range x.Parts {
		switch n, ok := sizes[p.Name]; {
		case !ok:
			return fmt.Errorf("%w: part %s is missing", pipeline.ErrCorrupted, st.Path(path.Join(dir, p.Name)))
		case n != p.Size:
			return fmt.Errorf("%w: part %s has %d bytes, the index recorded %d", pipeline.ErrCorrupted, st.Path(path.Join(dir, p.Name)), n, p.Size)
		}
	}
	for _, s := range x.Schema() {
		if err := pipeline.Verify(ctx, st, path.Join(dir, s.Name), s.Size, s.Checksum, ids); err != nil {
			return err
		}
	}
	return nil
}

// Restore loads the parts into eng (MySQL): the schema part, verified
// whole before it runs (its DDL commits as it goes); then the data parts
// over n connections at once, each streamed from the store while it loads
// (no part waits for the others' download), as one transaction committed
// only once every byte of the part matched its checksum (the COMMIT
// follows the part's last verified byte; on a broken or mismatching stream
// the client is killed and the server rolls the part back); on the same n
// connections the index parts (each table's deferred secondary keys, one
// ALTER TABLE per part), each verified whole first, as soon as the table's
// rows are all in (poolAfter); then the post part (triggers, views,
// routines, events), verified whole first.
//
// What a failure leaves (MySQL cannot make DDL and n connections one
// transaction): the schema, and the data parts committed before it, whole
// (never part of a part); no trigger, view or routine, and (failing in the
// index phase) some secondary indexes missing. The error then
// carries contract.CodeRestoreIncomplete and says how many data parts were
// committed (an index part may have run for a table whose rows are all
// in); the target must be restored again into an empty database.
// Tables that are not InnoDB (MyISAM, Aria) do not roll back.
//
// Data parts load with LOAD DATA where the server and the table allow it
// (load.go), else with their INSERTs; a part the LOAD DATA check refused
// is rolled back and loaded again with its INSERTs. log says which.
func Restore(ctx context.Context, st store.Store, dir string, x *Index, ids *crypt.Identities, eng engine.Engine, n int, log *slog.Logger) error {
	run := func(ctx context.Context, p Part, e engine.Engine) error {
		return pipeline.Restore(ctx, st, path.Join(dir, p.Name), p.Size, p.Checksum, ids, e)
	}
	whole := func(p Part) error {
		if err := pipeline.Verify(ctx, st, path.Join(dir, p.Name), p.Size, p.Checksum, ids); err != nil {
			return err
		}
		return run(ctx, p, eng)
	}
	for _, p := range x.Schema() {
		if err := whole(p); err != nil {
			return incomplete(err, 0, len(x.Data()), "in the schema part "+p.Name)
		}
	}
	data := interleave(x.Data())
	l, err := planLoads(ctx, eng, data, log)
	if err != nil {
		return incomplete(err, 0, len(data), "reading the tables' columns")
	}
	var committed atomic.Int64
	loadData := func(ctx context.Context, p Part) error {
		var e engine.Engine = txEngine{eng}
		if l != nil {
			e = loadPart{Engine: eng, l: l, table: p.Table}
		}
		err := run(ctx, p, e)
		if errors.Is(err, errNotLoadable) {
			log.Warn("data part loads with its INSERT statements", "part", p.Name, "table", p.Table, "reason", err.Error())
			err = run(ctx, p, txEngine{eng})
		}
		if err != nil {
			return fmt.Errorf("data part %s (%s): %w", p.Name, p.Table, err)
		}
		log.Debug("data part committed", "done", committed.Add(1), "of", len(data))
		return nil
	}
	// A table's secondary indexes, each part read whole before its ALTER
	// TABLE runs, as soon as every data part of the table is committed.
	buildIndex := func(ctx context.Context, p Part) error {
		if err := pipeline.Verify(ctx, st, path.Join(dir, p.Name), p.Size, p.Checksum, ids); err != nil {
			return fmt.Errorf("index part %s (%s): %w", p.Name, p.Table, err)
		}
		if err := run(ctx, p, eng); err != nil {
			return fmt.Errorf("index part %s (%s): %w", p.Name, p.Table, err)
		}
		return nil
	}
	err = poolAfter(ctx, data, x.Indexes(), n, func(ctx context.Context, p Part) error {
		if p.Phase == PhaseIndex {
			if err := buildIndex(ctx, p); err != nil {
				return indexFailed{err}
			}
			return nil
		}
		return loadData(ctx, p)
	})
	switch {
	case errors.As(err, new(indexFailed)):
		return incomplete(err, int(committed.Load()), len(data), "while building secondary indexes (some may be missing)")
	case err != nil:
		return incomplete(err, int(committed.Load()), len(data), "")
	}
	for _, p := range x.Post() {
		if err := whole(p); err != nil {
			return incomplete(err, len(data), len(data), "in the post part "+p.Name+" (triggers, views, routines, events)")
		}
	}
	return nil
}

// indexFailed is the error of an index part.
type indexFailed struct{ error }

func (e indexFailed) Unwrap() error { return e.error }

// poolAfter runs fn for each data part and each index part on up to n
// goroutines: an index part (a table's ALTER TABLE … ADD KEY, mostly
// waiting on the server's writes) as soon as every data part of its table
// is committed, before the data parts still waiting, so the builds run
// beside the other tables' loads instead of after them all. An index
// part of a table without a data part waits for every data part. The
// first error cancels the others and is returned.
func poolAfter(ctx context.Context, data, indexes []Part, n int, fn func(context.Context, Part) error) error {
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	left := map[string]int{} // a table's data parts not yet committed
	for _, p := range data {
		left[p.Table]++
	}
	waiting := map[string][]Part{} // index parts by table ("" : after all data)
	var ready []Part
	for _, p := range indexes {
		t := p.Table
		if left[t] == 0 {
			t = ""
		}
		waiting[t] = append(waiting[t], p)
	}
	if len(data) == 0 {
		ready, waiting[""] = waiting[""], nil
	}
	var (
		mu       sync.Mutex
		cond     = sync.NewCond(&mu)
		running  int
		first    error
		dataLeft = len(data)
		wg       sync.WaitGroup
	)
	// next returns the next part to run (false: nothing left, or failed).
	next := func() (Part, bool) {
		mu.Lock()
		defer mu.Unlock()
		for {
			switch {
			case first != nil:
				return Part{}, false
			case len(ready) > 0:
				p := ready[0]
				ready = ready[1:]
				running++
				return p, true
			case len(data) > 0:
				p := data[0]
				data = data[1:]
				running++
				return p, true
			case running == 0:
				return Part{}, false // nothing runs that could make an index part ready
			}
			cond.Wait()
		}
	}
	done := func(p Part, err error) {
		mu.Lock()
		defer mu.Unlock()
		running--
		switch {
		case err != nil:
			if first == nil {
				first = err
				cancel(err)
			}
		case p.Phase != PhaseIndex:
			dataLeft--
			if left[p.Table]--; left[p.Table] == 0 {
				ready = append(ready, waiting[p.Table]...)
			}
			if dataLeft == 0 {
				ready = append(ready, waiting[""]...)
			}
		}
		cond.Broadcast()
	}
	for range max(1, min(n, len(data)+len(indexes))) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				p, ok := next()
				if !ok {
					return
				}
				done(p, fn(ctx, p))
			}
		}()
	}
	wg.Wait()
	if first != nil {
		return first
	}
	return context.Cause(ctx)
}

// pool runs fn for each part on up to n goroutines; the first error
// cancels the others and is returned.
func pool[T any](ctx context.Context, ps []T, n int, fn func(context.Context, T) error) error {
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	next := make(chan T)
	var (
		wg    sync.WaitGroup
		once  sync.Once
		first error
	)
	for range max(1, min(n, len(ps))) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for p := range next {
				if err := fn(ctx, p); err != nil {
					once.Do(func() { first = err; cancel(err) })
					return
				}
			}
		}()
	}
feed:
	for _, p := range ps {
		select {
		case next <- p:
		case <-ctx.Done():
			break feed
		}
	}
	close(next)
	wg.Wait()
	if first != nil {
		return first
	}
	return context.Cause(ctx)
}

func incomplete(err error, done, total int, where string) error {
	if where != "" {
		where = " " + where
	}
	return &contract.CodedError{Code: contract.CodeRestoreIncomplete, Err: fmt.Errorf(
		"%w%s; the target holds the schema and %d of %d data part(s), each whole (MySQL commits DDL at once; restore again into an empty database)",
		err, where, done, total)}
}

// txEngine loads one part as one transaction: "SET autocommit=0", the
// part, then "COMMIT" only after the part's stream ended cleanly (which
// pipeline.Restore allows only once every byte matched the checksum). A
// failed stream never reaches the COMMIT: the client is killed and the
// server rolls the transaction back.
type txEngine struct{ engine.Engine }

func (t txEngine) Restore(ctx context.Context, r io.Reader) error {
	return t.Engine.Restore(ctx, io.MultiReader(strings.NewReader("SET autocommit=0;\n"), r, strings.NewReader("\nCOMMIT;\n")))
}

// interleave orders data parts so that parts loaded at once are of
// different tables where it can: one part of each table in turn, the
// tables with the most parts first.
func interleave(ps []Part) []Part {
	var tables []string
	by := map[string][]Part{}
	for _, p := range ps {
		if _, ok := by[p.Table]; !ok {
			tables = append(tables, p.Table)
		}
		by[p.Table] = append(by[p.Table], p)
	}
	// The tables with the most parts first: they finish last otherwise.
	slices.SortStableFunc(tables, func(a, b string) int { return len(by[b]) - len(by[a]) })
	out := make([]Part, 0, len(ps))
	for len(out) < len(ps) {
		for _, t := range tables {
			if q := by[t]; len(q) > 0 {
				out = append(out, q[0])
				by[t] = q[1:]
			}
		}
	}
	return out
}
