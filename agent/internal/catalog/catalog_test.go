package catalog

import (
	"strings"
	"testing"
	"time"

	"cairn.dev/agent/internal/naming"
)

var job = naming.Job{Namespace: "shop", Name: "orders"}

func entry(t *testing.T, at time.Time) Entry {
	t.Helper()
	at = at.UTC().Truncate(time.Millisecond)
	name, err := naming.ArtifactName(job, "postgres", at)
	if err != nil {
		t.Fatal(err)
	}
	return Entry{Name: name, Size: 10, Checksum: "sha256:" + strings.Repeat("ab", 32), Start: at, End: at.Add(time.Minute),
		DurationSeconds: 60, Engine: "postgres", Format: "pg_dump-custom", Compression: "zstd"}
}

var t0 = time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)

func TestWith(t *testing.T) {
	e1, e2, e3 := entry(t, t0), entry(t, t0.Add(time.Hour)), entry(t, t0.Add(2*time.Hour))
	replaced := e2
	replaced.Size = 99
	bad := e1
	bad.Checksum = "md5:x"
	wrongEngine := e1
	wrongEngine.Engine = "mysql"
	otherJob := e1
	otherJob.Name = strings.Replace(e1.Name, "orders", "other", 1)

	tests := []struct {
		name    string
		start   []Entry
		add     Entry
		want    []Entry
		wantErr string
	}{
		{name: "first entry", add: e1, want: []Entry{e1}},
		{name: "appends in order", start: []Entry{e1, e2}, add: e3, want: []Entry{e1, e2, e3}},
		{name: "inserts out of order sorted", start: []Entry{e1, e3}, add: e2, want: []Entry{e1, e2, e3}},
		{name: "same name replaces", start: []Entry{e1, e2}, add: replaced, want: []Entry{e1, replaced}},
		{name: "bad checksum", start: []Entry{e1}, add: bad, wantErr: "checksum"},
		{name: "engine differs from name", add: wrongEngine, wantErr: "engine"},
		{name: "other job's artifact", add: otherJob, wantErr: "does not belong"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := New(job)
			c.Entries = append(c.Entries, tt.start...)
			before := len(c.Entries)
			got, err := c.With(tt.add, t0.Add(time.Hour))
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("With: %v, want error %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if len(c.Entries) != before {
				t.Fatalf("With modified its receiver")
			}
			if len(got.Entries) != len(tt.want) {
				t.Fatalf("got %d entries, want %d", len(got.Entries), len(tt.want))
			}
			for i := range tt.want {
				if got.Entries[i] != tt.want[i] {
					t.Errorf("entry %d = %+v, want %+v", i, got.Entries[i], tt.want[i])
				}
			}
			if !got.UpdatedAt.Equal(t0.Add(time.Hour)) {
				t.Errorf("UpdatedAt = %v", got.UpdatedAt)
			}
		})
	}
}

func TestWithoutAndNewest(t *testing.T) {
	e1, e2, e3 := entry(t, t0), entry(t, t0.Add(time.Hour)), entry(t, t0.Add(2*time.Hour))
	c := New(job)
	c.Entries = []Entry{e1, e2, e3}
	got := c.Without([]string{e1.Name, e3.Name, "unknown"}, t0)
	if len(got.Entries) != 1 || got.Entries[0] != e2 || len(c.Entries) != 3 {
		t.Fatalf("Without = %+v (receiver %d entries)", got.Entries, len(c.Entries))
	}
	if n, ok := c.Newest(); !ok || n != e3 {
		t.Fatalf("Newest = %+v, %v", n, ok)
	}
	if _, ok := New(job).Newest(); ok {
		t.Fatal("empty catalog has a newest entry")
	}
	if f, ok := c.Find("some/prefix/" + e2.Name); !ok || f != e2 {
		t.Fatalf("Find by path = %+v, %v", f, ok)
	}
	if _, ok := c.Find("nope"); ok {
		t.Fatal("Find found a missing entry")
	}
}

func TestEncodeDecode(t *testing.T) {
	c := New(job)
	var err error
	for _, at := range []time.Time{t0.Add(time.Hour), t0} {
		if c, err = c.With(entry(t, at), at); err != nil {
			t.Fatal(err)
		}
	}
	data := c.Encode()
	got, err := Decode(data, job)
	if err != nil {
		t.Fatal(err)
	}
	if string(got.Encode()) != string(data) {
		t.Fatalf("round trip changed the catalog:\n%s\n%s", data, got.Encode())
	}

	tests := []struct {
		name, data, wantErr string
	}{
		{"truncated", string(data[:len(data)/2]), "not valid JSON"},
		{"other kind", `{"kind":"X","version":1,"backupJob":"shop/orders","entries":[]}`, "kind"},
		{"future version", `{"kind":"CairnBackupCatalog","version":2,"backupJob":"shop/orders","entries":[]}`, "version 2"},
		{"other job", `{"kind":"CairnBackupCatalog","version":1,"backupJob":"shop/other","entries":[]}`, "belongs to"},
		{"bad entry", strings.Replace(string(data), "sha256:", "sha1:", 1), "checksum"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if _, err := Decode([]byte(tt.data), job); err == nil || !strings.Contains(err.Error(), tt.wantErr) {
				t.Fatalf("Decode: %v, want error %q", err, tt.wantErr)
			}
		})
	}
	empty, err := Decode([]byte(`{"kind":"CairnBackupCatalog","version":1,"backupJob":"shop/orders"}`), job)
	if err != nil || empty.Entries == nil || len(empty.Entries) != 0 {
		t.Fatalf("empty catalog: %+v, %v", empty, err)
	}
}

func TestManifestRoundTrip(t *testing.T) {
	e := entry(t, t0)
	data, err := EncodeManifest(job, e)
	if err != nil {
		t.Fatal(err)
	}
	got, err := DecodeManifest(data, job, job.ManifestKey(e.Name))
	if err != nil || got != e {
		t.Fatalf("DecodeManifest = %+v, %v; want %+v", got, err, e)
	}
	other := entry(t, t0.Add(time.Hour))
	tests := []struct{ name, data, key, wantErr string }{
		{"truncated", string(data[:len(data)/2]), job.ManifestKey(e.Name), "not valid JSON"},
		{"key names another artifact", string(data), job.ManifestKey(other.Name), "not the one its key names"},
		{"other job", strings.Replace(string(data), `"shop/orders"`, `"shop/other"`, 1), job.ManifestKey(e.Name), "belongs to"},
		{"catalog kind", strings.Replace(string(data), ManifestKind, Kind, 1), job.ManifestKey(e.Name), "kind"},
		{"bad checksum", strings.Replace(string(data), "sha256:", "md5:", 1), job.ManifestKey(e.Name), "checksum"},
	}
	for _, tt := range tests {
		if _, err := DecodeManifest([]byte(tt.data), job, tt.key); err == nil || !strings.Contains(err.Error(), tt.wantErr) {
			t.Errorf("%s: DecodeManifest: %v, want error %q", tt.name, err, tt.wantErr)
		}
	}
	bad := e
	bad.Engine = "mysql"
	if _, err := EncodeManifest(job, bad); err == nil {
		t.Error("EncodeManifest accepted an entry whose engine contradicts its name")
	}
}
