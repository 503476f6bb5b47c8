package catalog

import (
	"slices"
	"strings"
	"testing"
	"time"
)

func TestExpired(t *testing.T) {
	now := t0
	day := 24 * time.Hour
	at := func(ago time.Duration) Entry { return entry(t, now.Add(-ago)) }
	names := func(es []Entry) []string {
		var out []string
		for _, e := range es {
			out = append(out, e.Name)
		}
		return out
	}
	old1, old2, old3 := at(30*day), at(20*day), at(10*day)
	edge := at(7 * day) // exactly at the cutoff: kept
	fresh1, fresh2 := at(2*day), at(time.Hour)

	tests := []struct {
		name    string
		entries []Entry
		days    int
		want    []Entry
		wantErr string
	}{
		{name: "empty", days: 7},
		{name: "all fresh", entries: []Entry{fresh1, fresh2}, days: 7},
		{name: "old ones go", entries: []Entry{old1, old2, fresh1, fresh2}, days: 7, want: []Entry{old1, old2}},
		{name: "cutoff is inclusive of the boundary", entries: []Entry{old3, edge, fresh1}, days: 7, want: []Entry{old3}},
		{name: "all old: newest kept", entries: []Entry{old1, old2, old3}, days: 7, want: []Entry{old1, old2}},
		{name: "single old: kept", entries: []Entry{old1}, days: 1},
		{name: "unsorted input, newest still kept", entries: []Entry{old3, old1, old2}, days: 1, want: []Entry{old1, old2}},
		{name: "long retention", entries: []Entry{old1, old2, fresh1}, days: 365},
		{name: "zero days refused", entries: []Entry{old1}, days: 0, wantErr: "at least 1"},
		{name: "negative days refused", entries: []Entry{old1}, days: -3, wantErr: "at least 1"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := Expired(tt.entries, now, tt.days)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("err = %v, want %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			gotN, wantN := names(got), names(tt.want)
			slices.Sort(gotN)
			slices.Sort(wantN)
			if !slices.Equal(gotN, wantN) {
				t.Fatalf("Expired = %v, want %v", gotN, wantN)
			}
		})
	}
}

func TestLeftovers(t *testing.T) {
	now := t0
	e1 := entry(t, now.Add(-48*time.Hour))
	c := New(job)
	c.Entries = []Entry{e1}
	key := job.Key
	objs := []Object{
		{Key: job.CatalogKey(), ModTime: now.Add(-100 * time.Hour)},
		{Key: key(e1.Name), ModTime: now.Add(-48 * time.Hour)},
		{Key: key(".x.pgdump.zst.partial-1"), ModTime: now.Add(-25 * time.Hour)},              // old partial: swept
		{Key: key(".y.pgdump.zst.partial-2"), ModTime: now.Add(-time.Hour)},                   // maybe in progress: kept
		{Key: key("shop_orders_unlisted.pgdump.zst"), ModTime: now.Add(-30 * 24 * time.Hour)}, // unlisted: swept
		{Key: key("edge"), ModTime: now.Add(-LeftoverGrace)},                                  // exactly at grace: kept
	}
	got := Leftovers(objs, job.CatalogKey(), c, key, now)
	var keys []string
	for _, o := range got {
		keys = append(keys, o.Key)
	}
	want := []string{key(".x.pgdump.zst.partial-1"), key("shop_orders_unlisted.pgdump.zst")}
	if !slices.Equal(keys, want) {
		t.Fatalf("Leftovers = %v, want %v", keys, want)
	}
}
