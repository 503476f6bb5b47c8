package parts

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"

	"cairn.dev/agent/internal/inventory"
)

// A PostgreSQL restore into a new database builds a table's indexes as
// soon as its rows are in, beside the other tables' loads, as pg_restore
// --jobs does from a local file (measured: loads and index builds mixed
// take ~3/4 of the time of all loads, then all builds; docs/benchmarks.md).
// The schema part's table of contents says what waits for what.

// postGroup is post-data entries of the schema archive that wait only
// for the rows of some data parts.
type postGroup struct {
	waits []int // data part indexes
	ids   []int64
}

// pgPostPlan splits the schema archive's post-data entries (toc) into
// groups that may run once the data parts they need are committed (a
// table's indexes, primary key and unique constraints, triggers, rules,
// policies: entries that depend on tables only) and the entries that run
// last, once every part and group is in: foreign keys (they check rows of
// two tables and need the referenced key built), entries that depend on
// other post-data entries or on a table of a partition tree, and entries
// that depend on no table the parts load. A table's rows are in its own data part (Part.Table "schema.name")
// or, without one, in the part of all other tables (Table "").
func pgPostPlan(toc inventory.ArchiveCounts, data []Part) (groups []*postGroup, last []int64) {
	partOf := map[string]int{}
	rest := -1
	for i, p := range data {
		if p.Table == "" {
			rest = i
		} else {
			partOf[p.Table] = i
		}
	}
	// A partitioned table's rows are in its partitions' parts, and what is
	// created on it reaches them (a trigger on the parent fires on every
	// partition): nothing that depends on a table in a partition tree
	// (the tables each TABLE ATTACH entry depends on) is built before
	// every part is in.
	partitioned := map[int64]bool{}
	for _, e := range toc.Entries {
		if e.Desc == "TABLE ATTACH" {
			for _, d := range e.Deps {
				partitioned[d] = true
			}
		}
	}
	tables := map[int64]int{} // TABLE entry → its data part
	post := map[int64]bool{}
	for _, e := range toc.Entries {
		switch {
		case e.Desc == "TABLE":
			if i, ok := partOf[pgTable(e.Schema, e.Tag)]; ok {
				tables[e.ID] = i
			} else if rest >= 0 {
				tables[e.ID] = rest
			}
		case e.Section == inventory.SectionPostData:
			post[e.ID] = true
		}
	}
	byKey := map[string]*postGroup{}
	for _, e := range toc.Entries {
		if e.Section != inventory.SectionPostData {
			continue
		}
		var waits []int
		alone := e.Desc != "FK CONSTRAINT"
		for _, d := range e.Deps {
			if post[d] || partitioned[d] {
				alone = false
			}
			if i, ok := tables[d]; ok && !slices.Contains(waits, i) {
				waits = append(waits, i)
			}
		}
		if !alone || len(waits) == 0 {
			last = append(last, e.ID)
			continue
		}
		slices.Sort(waits)
		key := fmt.Sprint(waits)
		g := byKey[key]
		if g == nil {
			g = &postGroup{waits: waits}
			byKey[key] = g
			groups = append(groups, g)
		}
		g.ids = append(g.ids, e.ID)
	}
	return groups, last
}

// writeList writes a pg_restore --use-list file of ids (one "ID;" line
// each: pg_restore reads the number before the semicolon) under dir.
func writeList(dir, name string, ids []int64) (string, error) {
	var b strings.Builder
	for _, id := range ids {
		b.WriteString(strconv.FormatInt(id, 10) + ";\n")
	}
	file := filepath.Join(dir, name)
	return file, os.WriteFile(file, []byte(b.String()), 0o600)
}

// schedule runs the data parts and the post groups on n workers: a group
// as soon as the parts it waits for are committed, before the next data
// part (a build beside a load), then what is left. The first error
// cancels the rest and is returned. Groups whose parts never committed
// (none, unless a part failed) are returned to run last.
func schedule(ctx context.Context, n int, data []Part, groups []*postGroup,
	load func(context.Context, Part) error, build func(context.Context, *postGroup) error) ([]*postGroup, error) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var (
		mu        sync.Mutex
		cond      = sync.NewCond(&mu)
		next      int
		running   int
		ready     []*postGroup
		pending   = slices.Clone(groups)
		committed = map[int]bool{}
		first     error
	)
	release := func() {
		kept := pending[:0]
		for _, g := range pending {
			if !slices.ContainsFunc(g.waits, func(i int) bool { return !committed[i] }) {
				ready = append(ready, g)
			} else {
				kept = append(kept, g)
			}
		}
		pending = kept
	}
	var wg sync.WaitGroup
	for range max(1, n) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				mu.Lock()
				var g *postGroup
				part := -1
				for first == nil {
					if len(ready) > 0 {
						g, ready = ready[0], ready[1:]
						break
					}
					if next < len(data) {
						part, next = next, next+1
						break
					}
					if running == 0 {
						break
					}
					cond.Wait()
				}
				if g == nil && part < 0 {
					cond.Broadcast()
					mu.Unlock()
					return
				}
				running++
				mu.Unlock()
				var err error
				if g != nil {
					err = build(ctx, g)
				} else {
					err = load(ctx, data[part])
				}
				mu.Lock()
				running--
				switch {
				case err != nil && first == nil:
					first = err
					cancel()
				case err == nil && part >= 0:
					committed[part] = true
					release()
				}
				cond.Broadcast()
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	if first != nil {
		return nil, first
	}
	return pending, ctx.Err()
}
