package parts

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"

	"cairn.dev/agent/internal/inventory"
)

func TestPGPostPlan(t *testing.T) {
	pre, post := inventory.SectionPreData, inventory.SectionPostData
	toc := inventory.ArchiveCounts{Entries: []inventory.ArchiveEntry{
		{ID: 1, Desc: "TABLE", Schema: "public", Tag: "a", Section: pre},
		{ID: 2, Desc: "TABLE", Schema: "public", Tag: "b", Section: pre},
		{ID: 3, Desc: "TABLE", Schema: "public", Tag: "small", Section: pre},
		{ID: 5, Desc: "FUNCTION", Schema: "public", Tag: "f()", Section: pre},
		{ID: 10, Desc: "INDEX", Schema: "public", Tag: "a_x", Section: post, Deps: []int64{1}},
		{ID: 11, Desc: "CONSTRAINT", Schema: "public", Tag: "b b_pkey", Section: post, Deps: []int64{2}},
		{ID: 12, Desc: "FK CONSTRAINT", Schema: "public", Tag: "a a_b", Section: post, Deps: []int64{1, 11}},
		{ID: 13, Desc: "TRIGGER", Schema: "public", Tag: "small t", Section: post, Deps: []int64{3, 5}},
		{ID: 14, Desc: "COMMENT", Schema: "public", Tag: "INDEX a_x", Section: post, Deps: []int64{10}},
		{ID: 15, Desc: "INDEX", Schema: "public", Tag: "a_y", Section: post, Deps: []int64{1}},
		{ID: 16, Desc: "EVENT TRIGGER", Tag: "e", Section: post, Deps: []int64{5}},
		{ID: 17, Desc: "INDEX", Schema: "public", Tag: "ab", Section: post, Deps: []int64{1, 2}},
		// A partition tree: p (partitioned) with partition p1; what
		// depends on either waits for every part.
		{ID: 20, Desc: "TABLE", Schema: "public", Tag: "p", Section: pre},
		{ID: 21, Desc: "TABLE", Schema: "public", Tag: "p1", Section: pre},
		{ID: 22, Desc: "TABLE ATTACH", Schema: "public", Tag: "p1", Section: pre, Deps: []int64{20, 21}},
		{ID: 23, Desc: "TRIGGER", Schema: "public", Tag: "p t", Section: post, Deps: []int64{20, 5}},
		{ID: 24, Desc: "INDEX", Schema: "public", Tag: "p1_x", Section: post, Deps: []int64{21}},
	}}
	data := []Part{{Name: "data-00001"}, {Name: "data-00002", Table: `"public"."a"`}, {Name: "data-00003", Table: `"public"."b"`}, {Name: "data-00004", Table: `"public"."p1"`}}
	groups, last := pgPostPlan(toc, data)
	got := map[string][]int64{}
	for _, g := range groups {
		got[fmt.Sprint(g.waits)] = g.ids
	}
	want := map[string][]int64{"[1]": {10, 15}, "[2]": {11}, "[0]": {13}, "[1 2]": {17}}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("groups %v, want %v", got, want)
	}
	// Foreign keys, entries on post-data entries, on a partition tree and
	// on no table: last.
	if !slices.Equal(last, []int64{12, 14, 16, 23, 24}) {
		t.Errorf("last %v, want [12 14 16 23 24]", last)
	}
}

func TestSchedule(t *testing.T) {
	data := []Part{{Name: "p0"}, {Name: "p1"}, {Name: "p2"}, {Name: "p3"}}
	groups := []*postGroup{{waits: []int{0}, ids: []int64{100}}, {waits: []int{1, 2}, ids: []int64{200}}}
	for _, n := range []int{1, 2, 3, 8} {
		var mu sync.Mutex
		var events []string
		done := map[string]bool{}
		record := func(s string) {
			mu.Lock()
			defer mu.Unlock()
			events = append(events, s)
			done[s] = true
		}
		left, err := schedule(context.Background(), n, data, groups, func(_ context.Context, p Part) error {
			record(p.Name)
			return nil
		}, func(_ context.Context, g *postGroup) error {
			mu.Lock()
			for _, w := range g.waits {
				if !done[data[w].Name] {
					t.Errorf("n=%d: group %v ran before %s was committed", n, g.ids, data[w].Name)
				}
			}
			mu.Unlock()
			record(fmt.Sprint(g.ids))
			return nil
		})
		if err != nil || len(left) != 0 || len(events) != 6 {
			t.Fatalf("n=%d: err %v, left %v, events %v", n, err, left, events)
		}
		if n == 1 && !slices.Equal(events, []string{"p0", "[100]", "p1", "p2", "[200]", "p3"}) {
			t.Errorf("one worker: %v, want each group as soon as its parts are in", events)
		}
	}

	// A failed load stops the rest; the groups waiting for it never run
	// and the error is returned.
	boom := errors.New("boom")
	var built []int64
	_, err := schedule(context.Background(), 1, data, groups, func(_ context.Context, p Part) error {
		if p.Name == "p1" {
			return boom
		}
		return nil
	}, func(_ context.Context, g *postGroup) error {
		built = append(built, g.ids...)
		return nil
	})
	if !errors.Is(err, boom) || !slices.Equal(built, []int64{100}) {
		t.Errorf("err %v, built %v; want boom after [100] only", err, built)
	}
}
