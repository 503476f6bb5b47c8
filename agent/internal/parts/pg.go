package parts

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"path"
	"slices"
	"sync"

	"cairn.dev/agent/internal/engine"
	"cairn.dev/agent/internal/inventory"
	"cairn.dev/agent/internal/pipeline"
	"cairn.dev/agent/internal/store"
)

// A PostgreSQL multi-part artifact (naming.ExtPostgresParts) holds pg_dump
// custom-format archives (uncompressed by pg_dump; each part zstd, and age
// when encrypted, on its own), all dumped in one exported snapshot:
//
//	schema  pg_dump --schema-only: tables, types, functions, views (the
//	        pre-data section), and indexes, constraints, triggers (the
//	        post-data one: their dependencies on the tables tell a
//	        restore what may be built once which rows are in)
//	data    pg_dump --section=data --table=T: the rows of one large table
//	        (at least PGOptions.MinTable), one part per table; and one
//	        part --section=data --exclude-table-data=<the large tables>:
//	        every other table's rows, sequence values, large objects
//	post    pg_dump --section=post-data: indexes, constraints, triggers
//	        again, alone (a restore over an existing database, by hand)
//
// Every part restores by hand with pg_restore as well.

// PGOptions are a PostgreSQL multi-part backup's.
type PGOptions struct {
	Options
	// MinTable is the size (pg_table_size) from which a table's rows get a
	// part of their own; DefaultPartSize unless set.
	MinTable int64
	// Count counts each table's rows from the data parts as they stream
	// (inventory.ArchiveCounter).
	Count bool
}

// PGWritten is what PGBackup wrote.
type PGWritten struct {
	pipeline.Written
	Index *Index
	// Rows by table key (Count), and why some could not be counted.
	Rows     map[string]int64
	CountErr error
}

// PGBackup dumps pg (whose Snapshot the caller holds, exported, for the
// whole run) into parts under dir and writes the index under key. sizes
// are the tables' sizes in that snapshot (the caller lists them when it
// locks them); only tables the schema part creates get a part of their
// own. Parts are dumped o.Parallelism at once. On failure the parts
// written are deleted.
func PGBackup(ctx context.Context, pg *engine.Postgres, sizes map[inventory.ArchiveTable]int64, st store.Store, key, dir string, enc pipeline.Encoding, o PGOptions) (PGWritten, error) {
	if pg.Snapshot == "" || len(pg.Select) > 0 {
		return PGWritten{}, errors.New("a PostgreSQL multi-part backup needs an exported snapshot and the whole database")
	}
	if o.MinTable <= 0 {
		o.MinTable = DefaultPartSize
	}
	ext := o.Extension
	var (
		mu      sync.Mutex
		written []Part
	)
	removeAll := func() {
		mu.Lock()
		defer mu.Unlock()
		for _, p := range written {
			_ = st.Delete(context.WithoutCancel(ctx), path.Join(dir, p.Name))
		}
	}
	// dump stores one part: pg_dump with args, its archive also given to
	// counter when set.
	dump := func(ctx context.Context, p Part, counter *inventory.ArchiveCounter, args ...string) (Part, error) {
		var raw int64
		eng := dumpFunc{Engine: pg, dump: func(ctx context.Context, w io.Writer) error {
			cw := &countWriter{w: w, n: &raw}
			var to io.Writer = cw
			if counter != nil {
				to = io.MultiWriter(cw, counter)
			}
			err := pg.DumpArgs(ctx, to, args...)
			if counter != nil {
				counter.CloseWithError(err)
			}
			return err
		}}
		w, err := pipeline.Backup(ctx, eng, st, path.Join(dir, p.Name), enc)
		if err != nil {
			if counter != nil {
				counter.CloseWithError(err) // the dump may not have started
			}
			return p, fmt.Errorf("part %s: %w", p.Name, err)
		}
		p.RawSize, p.Size, p.Checksum = raw, w.Size, w.Checksum
		mu.Lock()
		written = append(written, p)
		mu.Unlock()
		return p, nil
	}

	// The schema first: its table of contents says which tables the dump
	// creates.
	toc := inventory.NewArchiveCounter()
	schema, err := dump(ctx, Part{Name: "schema-00001" + ext, Phase: PhaseSchema}, toc, "--schema-only")
	if err != nil {
		removeAll()
		return PGWritten{}, err
	}
	created, err := toc.Result()
	if err != nil {
		removeAll()
		return PGWritten{}, fmt.Errorf("reading the schema part's table of contents: %w", err)
	}
	var large []inventory.ArchiveTable
	var rest int64
	for _, t := range created.Tables {
		if sizes[t] >= o.MinTable {
			large = append(large, t)
		} else {
			rest += sizes[t]
		}
	}
	slices.SortStableFunc(large, func(a, b inventory.ArchiveTable) int { return cmp.Compare(sizes[b], sizes[a]) })

	type job struct {
		p    Part
		size int64
		args []string
	}
	jobs := []job{{p: Part{Name: "post-00001" + ext, Phase: PhasePost}, size: -1, args: []string{"--section=post-data"}}}
	others := []string{"--section=data"}
	for i, t := range large {
		pattern := engine.PatternQuote(t.Schema) + "." + engine.PatternQuote(t.Name)
		jobs = append(jobs, job{p: Part{Name: fmt.Sprintf("data-%05d%s", i+2, ext), Phase: PhaseData, Table: pgTable(t.Schema, t.Name)},
			size: sizes[t], args: []string{"--section=data", "--table=" + pattern}})
		others = append(others, "--exclude-table-data="+pattern)
	}
	jobs = append(jobs, job{p: Part{Name: "data-00001" + ext, Phase: PhaseData}, size: rest, args: others})
	// The post part (small) first, then the largest data first.
	slices.SortStableFunc(jobs[1:], func(a, b job) int { return cmp.Compare(b.size, a.size) })

	res := PGWritten{Rows: map[string]int64{}}
	var countMu sync.Mutex
	done := make([]Part, len(jobs))
	idx := make([]int, len(jobs))
	for i := range idx {
		idx[i] = i
	}
	err = pool(ctx, idx, max(o.Parallelism, 1), func(ctx context.Context, i int) error {
		j := jobs[i]
		var counter *inventory.ArchiveCounter
		if o.Count && j.p.Phase == PhaseData {
			counter = inventory.NewArchiveCounter()
		}
		stored, err := dump(ctx, j.p, counter, j.args...)
		if err != nil {
			return err
		}
		done[i] = stored
		if counter != nil {
			c, cerr := counter.Result()
			countMu.Lock()
			defer countMu.Unlock()
			if cerr != nil {
				res.CountErr = cmp.Or(res.CountErr, fmt.Errorf("part %s: %w", j.p.Name, cerr))
				return nil
			}
			for t, n := range c.Rows {
				res.Rows[t] = n
			}
		}
		return nil
	})
	if err != nil {
		removeAll()
		return PGWritten{}, err
	}
	x := &Index{Kind: Kind, Version: Version, Engine: pg.Name(), Format: pg.Format(), Compression: "zstd",
		Encrypted: enc.Recipients != nil, Parts: []Part{schema}}
	data := slices.DeleteFunc(slices.Clone(done), func(p Part) bool { return p.Phase != PhaseData })
	slices.SortFunc(data, func(a, b Part) int { return cmp.Compare(a.Name, b.Name) })
	x.Parts = append(append(x.Parts, data...), done[0])
	if res.Written, err = putIndex(ctx, st, key, x); err != nil {
		removeAll()
		return PGWritten{}, err
	}
	res.Index = x
	return res, nil
}

// dumpFunc is an engine whose Dump is dump.
type dumpFunc struct {
	engine.Engine
	dump func(context.Context, io.Writer) error
}

func (d dumpFunc) Dump(ctx context.Context, w io.Writer) error { return d.dump(ctx, w) }

// countWriter counts what passes.
type countWriter struct {
	w io.Writer
	n *int64
}

func (c *countWriter) Write(p []byte) (int, error) {
	n, err := c.w.Write(p)
	*c.n += int64(n)
	return n, err
}
