package catalog

import (
	"slices"
	"strings"
	"testing"
	"time"

	"cairn.dev/agent/internal/naming"
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

func TestSweep(t *testing.T) {
	now := t0
	old, ancient := now.Add(-48*time.Hour), now.Add(-30*24*time.Hour)
	listed := entry(t, old)                          // has a manifest
	legacy := entry(t, old.Add(time.Minute))         // listed by catalog.json only
	running := entry(t, ancient)                     // a long run, marker fresh
	deadRun := entry(t, ancient.Add(time.Hour))      // marker stale: run died
	lateManifest := entry(t, old.Add(2*time.Minute)) // manifest appeared after manifests were listed
	dangling := entry(t, old.Add(3*time.Minute))     // manifest without artifact
	key := job.Key
	legacyCat := New(job)
	legacyCat.Entries = []Entry{legacy}
	l := Listing{
		Markers:   []Object{{Key: job.MarkerKey(running.Name), ModTime: now.Add(-5 * time.Minute)}},
		Manifests: []Entry{listed, dangling},
		Legacy:    legacyCat,
		Objects: []Object{
			{Key: job.CatalogKey(), ModTime: ancient},
			{Key: key(listed.Name), ModTime: old},
			{Key: job.ManifestKey(listed.Name), ModTime: old},
			{Key: key(legacy.Name), ModTime: old},
			{Key: key(running.Name), ModTime: ancient},
			{Key: key("." + running.Name + ".partial-7"), ModTime: ancient},
			{Key: key(deadRun.Name), ModTime: ancient},
			{Key: job.MarkerKey(deadRun.Name), ModTime: ancient},
			{Key: key(lateManifest.Name), ModTime: old},
			{Key: job.ManifestKey(lateManifest.Name), ModTime: old},
			{Key: job.ManifestKey(dangling.Name), ModTime: old},
			{Key: job.EntriesPrefix() + "/." + listed.Name + ".json.partial-3", ModTime: old},
			{Key: key(".x.pgdump.zst.partial-1"), ModTime: now.Add(-25 * time.Hour)},
			{Key: key(".y.pgdump.zst.partial-2"), ModTime: now.Add(-time.Hour)},
			{Key: key("shop_orders_unlisted.pgdump.zst"), ModTime: ancient},
			{Key: key("edge"), ModTime: now.Add(-LeftoverGrace)},
			// verification records: of a present artifact (kept however old), of a gone one
			{Key: job.VerifiedKey(listed.Name), ModTime: ancient},
			{Key: job.VerifiedKey(dangling.Name), ModTime: ancient},
		},
	}
	if v := l.Verified(job); len(v) != 2 || !v[listed.Name] {
		t.Fatalf("Verified = %v", v)
	}
	var keys []string
	for _, o := range Sweep(job, l, now) {
		keys = append(keys, o.Key)
	}
	want := []string{
		key(deadRun.Name),
		job.MarkerKey(deadRun.Name),
		job.ManifestKey(dangling.Name),
		job.EntriesPrefix() + "/." + listed.Name + ".json.partial-3",
		key(".x.pgdump.zst.partial-1"),
		key("shop_orders_unlisted.pgdump.zst"),
		job.VerifiedKey(dangling.Name),
	}
	if !slices.Equal(keys, want) {
		t.Fatalf("Sweep =\n%s\nwant\n%s", strings.Join(keys, "\n"), strings.Join(want, "\n"))
	}

	// The legacy catalog goes once it lists nothing present.
	l.Objects = []Object{{Key: job.CatalogKey(), ModTime: ancient}}
	if got := Sweep(job, l, now); len(got) != 1 || got[0].Key != job.CatalogKey() {
		t.Fatalf("Sweep of an unused legacy catalog = %v", got)
	}
	// An upload of a live run is kept, a dead run's is not.
	if !KeepUpload(job, l.Markers, key(running.Name), now) || KeepUpload(job, l.Markers, key(deadRun.Name), now) {
		t.Fatal("KeepUpload")
	}
}

func TestIndex(t *testing.T) {
	a, b, c := entry(t, t0), entry(t, t0.Add(time.Hour)), entry(t, t0.Add(2*time.Hour))
	legacy := New(job)
	bOld := b
	bOld.Size = 1
	legacy.Entries = []Entry{a, bOld}
	objs := []Object{{Key: job.Key(a.Name)}, {Key: job.Key(b.Name)}} // c's artifact is gone
	got := Index(job, []Entry{c, b}, legacy, objs)
	if len(got.Entries) != 2 || got.Entries[0] != a || got.Entries[1] != b {
		t.Fatalf("Index = %+v, want a, then b from its manifest", got.Entries)
	}
}

// A multi-part artifact's parts (<artifact>.d/…) belong to it: kept with a
// listed artifact or a live run, swept with a dead run or a gone artifact.
func TestSweepParts(t *testing.T) {
	now := t0
	old := now.Add(-48 * time.Hour)
	mk := func(at time.Time) Entry {
		e := entry(t, at)
		e.Name, e.Engine, e.Parts = strings.TrimSuffix(e.Name, naming.ExtPostgres)+naming.ExtMySQLParts, "mysql", 3
		return e
	}
	listed, running, dead, gone := mk(old), mk(old.Add(time.Minute)), mk(old.Add(2*time.Minute)), mk(old.Add(3*time.Minute))
	part := func(e Entry, p string) Object { return Object{Key: job.PartKey(e.Name, p), ModTime: old} }
	l := Listing{
		Markers:   []Object{{Key: job.MarkerKey(running.Name), ModTime: now.Add(-time.Minute)}},
		Manifests: []Entry{listed, gone},
		Objects: []Object{
			{Key: job.Key(listed.Name), ModTime: old}, {Key: job.ManifestKey(listed.Name), ModTime: old},
			part(listed, "schema.sql.zst"), part(listed, "data-00001.sql.zst"),
			part(running, "data-00001.sql.zst"), part(running, ".data-00002.sql.zst.partial-1"),
			part(dead, "schema.sql.zst"),
			{Key: job.ManifestKey(gone.Name), ModTime: old}, part(gone, "post.sql.zst"),
		},
	}
	var keys []string
	for _, o := range Sweep(job, l, now) {
		keys = append(keys, o.Key)
	}
	want := []string{job.PartKey(dead.Name, "schema.sql.zst"), job.ManifestKey(gone.Name), job.PartKey(gone.Name, "post.sql.zst")}
	if !slices.Equal(keys, want) {
		t.Fatalf("Sweep =\n%s\nwant\n%s", strings.Join(keys, "\n"), strings.Join(want, "\n"))
	}
	if !KeepUpload(job, l.Markers, job.PartKey(running.Name, "data-00003.sql.zst"), now) {
		t.Error("an upload of a live run's part is not kept")
	}
}
