package parts

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
)

func TestPoolAfterRunsIndexesOnceTheirRowsAreIn(t *testing.T) {
	d := func(name, table string) Part { return Part{Name: name, Phase: PhaseData, Table: table} }
	ix := func(name, table string) Part { return Part{Name: name, Phase: PhaseIndex, Table: table} }
	data := []Part{d("A1", "`a`"), d("B1", "`b`"), d("A2", "`a`"), d("C1", "`c`")}
	indexes := []Part{ix("iA", "`a`"), ix("iB", "`b`"), ix("iX", "`x`")}

	// One connection: an index part runs as soon as its table's rows are
	// in, before the data parts still waiting; one of a table without
	// data parts after every data part.
	var order []string
	if err := poolAfter(context.Background(), data, indexes, 1, func(_ context.Context, p Part) error {
		order = append(order, p.Name)
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if got, want := strings.Join(order, " "), "A1 B1 iB A2 iA C1 iX"; got != want {
		t.Errorf("order %q, want %q", got, want)
	}

	// Several connections: never an index part before all its table's
	// data parts finished.
	for n := 2; n <= 4; n++ {
		var mu sync.Mutex
		finished := map[string]bool{}
		var bad []string
		if err := poolAfter(context.Background(), data, indexes, n, func(_ context.Context, p Part) error {
			mu.Lock()
			defer mu.Unlock()
			if p.Phase == PhaseIndex {
				for _, q := range data {
					if (q.Table == p.Table || p.Table == "`x`") && !finished[q.Name] {
						bad = append(bad, p.Name+" before "+q.Name)
					}
				}
			}
			finished[p.Name] = true
			return nil
		}); err != nil {
			t.Fatal(err)
		}
		if len(bad) > 0 || len(finished) != len(data)+len(indexes) {
			t.Errorf("n=%d: %v; ran %d of %d", n, bad, len(finished), len(data)+len(indexes))
		}
	}

	// A failed data part: its table's index part never runs, nothing
	// starts after, the error is returned.
	broken := errors.New("checksum mismatch")
	order = nil
	err := poolAfter(context.Background(), data, indexes, 1, func(_ context.Context, p Part) error {
		order = append(order, p.Name)
		if p.Name == "A2" {
			return broken
		}
		return nil
	})
	if !errors.Is(err, broken) || strings.Join(order, " ") != "A1 B1 iB A2" {
		t.Errorf("after a failed part: %v, ran %q", err, order)
	}

	// Only index parts (a database without rows): they run.
	order = nil
	if err := poolAfter(context.Background(), nil, indexes[:1], 2, func(_ context.Context, p Part) error {
		order = append(order, p.Name)
		return nil
	}); err != nil || strings.Join(order, " ") != "iA" {
		t.Errorf("index parts alone: %v, ran %q", err, order)
	}
}
