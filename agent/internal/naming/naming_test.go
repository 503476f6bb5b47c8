package naming

import (
	"slices"
	"strings"
	"testing"
	"time"
)

func TestParseJob(t *testing.T) {
	tests := []struct {
		in      string
		want    Job
		wantErr string
	}{
		{in: "shop/orders", want: Job{Namespace: "shop", Name: "orders"}},
		{in: "a/b.c-d", want: Job{Namespace: "a", Name: "b.c-d"}},
		{in: "orders", wantErr: "want namespace/name"},
		{in: "/orders", wantErr: "want namespace/name"},
		{in: "shop/", wantErr: "want namespace/name"},
		{in: "a/b/c", wantErr: "want namespace/name"},
		{in: "Shop/orders", wantErr: "namespace"},
		{in: "shop/Orders", wantErr: "name"},
		{in: "shop/../x", wantErr: "name"},
		{in: "../x/y", wantErr: "want namespace/name"},
		{in: "shop/a_b", wantErr: "name"},
		{in: strings.Repeat("a", 64) + "/b", wantErr: "namespace"},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			got, err := ParseJob(tt.in)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("ParseJob(%q) = %v, %v; want error containing %q", tt.in, got, err, tt.wantErr)
				}
				return
			}
			if err != nil || got != tt.want {
				t.Fatalf("ParseJob(%q) = %v, %v; want %v", tt.in, got, err, tt.want)
			}
			if got.String() != tt.in {
				t.Errorf("String() = %q, want %q", got.String(), tt.in)
			}
		})
	}
}

func TestArtifactName(t *testing.T) {
	job := Job{Namespace: "shop", Name: "orders"}
	at := time.Date(2026, 1, 2, 3, 4, 5, 123456789, time.FixedZone("CET", 3600))
	tests := []struct {
		engine, want, wantErr string
	}{
		{engine: "postgres", want: "shop_orders_20260102T020405.123Z.pgdump.zst"},
		{engine: "mysql", want: "shop_orders_20260102T020405.123Z.sql.zst"},
		{engine: "oracle", wantErr: "unknown engine"},
	}
	for _, tt := range tests {
		t.Run(tt.engine, func(t *testing.T) {
			got, err := ArtifactName(job, tt.engine, at)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("got %q, %v; want error %q", got, err, tt.wantErr)
				}
				return
			}
			if err != nil || got != tt.want {
				t.Fatalf("ArtifactName = %q, %v; want %q", got, err, tt.want)
			}
			// Deterministic: the same input gives the same name.
			again, _ := ArtifactName(job, tt.engine, at)
			if again != got {
				t.Fatalf("not deterministic: %q then %q", got, again)
			}
			start, engine, err := ParseArtifactName(job, got)
			if err != nil || engine != tt.engine || !start.Equal(at.Truncate(time.Millisecond)) {
				t.Fatalf("ParseArtifactName(%q) = %v, %q, %v", got, start, engine, err)
			}
		})
	}
}

func TestArtifactNamesSortInTimeOrder(t *testing.T) {
	job := Job{Namespace: "ns", Name: "job"}
	base := time.Date(2026, 12, 31, 23, 59, 59, 0, time.UTC)
	// Times chosen to break naive formats: across a year, single digits,
	// sub-second differences, a time zone.
	times := []time.Time{
		base,
		base.Add(time.Millisecond),
		base.Add(999 * time.Millisecond),
		base.Add(time.Second),
		base.Add(-9 * time.Hour),
		base.AddDate(-1, 0, 0),
		base.AddDate(0, 0, 1).In(time.FixedZone("X", -11*3600)),
	}
	var names []string
	for _, at := range times {
		n, err := ArtifactName(job, "postgres", at)
		if err != nil {
			t.Fatal(err)
		}
		names = append(names, n)
	}
	byName := slices.Clone(names)
	slices.Sort(byName)
	byTime := slices.Clone(times)
	slices.SortFunc(byTime, func(a, b time.Time) int { return a.Compare(b) })
	for i, at := range byTime {
		want, _ := ArtifactName(job, "postgres", at)
		if byName[i] != want {
			t.Fatalf("lexical order %v differs from time order at %d (%s)", byName, i, want)
		}
	}
}

func TestParseArtifactNameRejects(t *testing.T) {
	job := Job{Namespace: "shop", Name: "orders"}
	for _, name := range []string{
		"shop_other_20260102T030405.123Z.pgdump.zst",
		"shop_orders_20260102T030405.123Z.pgdump",
		"shop_orders_20260102T030405Z.pgdump.zst",
		"shop_orders_garbage.sql.zst",
		".shop_orders_20260102T030405.123Z.pgdump.zst.partial-123",
		"catalog.json",
		"shop_orders_20260102T030405.123Z-1a2b3c4.pgdump.zst",
		"shop_orders_20260102T030405.123Z-1A2B3C4D.pgdump.zst",
		"shop_orders_20260102T030405.123Z_1a2b3c4d.pgdump.zst",
	} {
		if _, _, err := ParseArtifactName(job, name); err == nil {
			t.Errorf("ParseArtifactName(%q) accepted it", name)
		}
	}
}

// Tokens make names of runs started in the same millisecond differ, and
// still parse to the start time.
func TestArtifactNameToken(t *testing.T) {
	job := Job{Namespace: "shop", Name: "orders"}
	at := time.Date(2026, 1, 2, 3, 4, 5, 123000000, time.UTC)
	seen := map[string]bool{}
	for i := 0; i < 100; i++ {
		name, err := ArtifactNameToken(job, "mysql", at, NewToken())
		if err != nil {
			t.Fatal(err)
		}
		if seen[name] {
			t.Fatalf("two tokens gave the name %s", name)
		}
		seen[name] = true
		start, engine, err := ParseArtifactName(job, name)
		if err != nil || engine != "mysql" || !start.Equal(at) {
			t.Fatalf("ParseArtifactName(%q) = %v, %q, %v", name, start, engine, err)
		}
	}
	if got, _ := ArtifactNameToken(job, "postgres", at, "00ff00ff"); got != "shop_orders_20260102T030405.123Z-00ff00ff.pgdump.zst" {
		t.Errorf("name = %q", got)
	}
	for _, bad := range []string{"xyz", "ABCDEF01", "0123456789"} {
		if _, err := ArtifactNameToken(job, "postgres", at, bad); err == nil {
			t.Errorf("token %q accepted", bad)
		}
	}
}

func TestKeys(t *testing.T) {
	job := Job{Namespace: "shop", Name: "orders"}
	if got := job.ManifestKey("a.sql.zst"); got != "shop/orders/entries/a.sql.zst.json" {
		t.Errorf("ManifestKey = %q", got)
	}
	if got := job.MarkerKey("a.sql.zst"); got != "shop/orders/running/a.sql.zst.json" {
		t.Errorf("MarkerKey = %q", got)
	}
	if got := job.CatalogKey(); got != "shop/orders/catalog.json" {
		t.Errorf("CatalogKey = %q", got)
	}
	if got := job.Key("x.pgdump.zst"); got != "shop/orders/x.pgdump.zst" {
		t.Errorf("Key = %q", got)
	}
}

// A MigrationJob's exports live under their own directory, which no
// BackupJob's directory (namespace/name, a namespace has no '_') contains.
func TestMigrationJobKeySpace(t *testing.T) {
	m := MigrationJob("shop", "orders")
	if got := m.Key("a.pgdump.zst"); got != "_migrations/shop/orders/a.pgdump.zst" {
		t.Fatalf("migration key %q", got)
	}
	for _, bj := range []Job{{Namespace: "shop", Name: "orders"}, {Namespace: "_migrations", Name: "shop"}} {
		if strings.HasPrefix(m.Dir()+"/", bj.Dir()+"/") {
			if _, err := ParseJob(bj.String()); err == nil {
				t.Errorf("BackupJob %s (a valid one) contains the migration's directory %s", bj, m.Dir())
			}
		}
	}
}

// Multi-part artifact names of both engines: ToParts keeps the start and
// token, Multipart and PartExtension recognise them (encrypted too), and
// they parse back to their engine and start.
func TestPartsNames(t *testing.T) {
	j := Job{Namespace: "shop", Name: "orders"}
	start := time.Date(2026, 12, 6, 10, 0, 0, 0, time.UTC)
	for _, tc := range []struct{ engine, ext, partExt string }{
		{"postgres", ExtPostgresParts, ExtPostgres},
		{"mysql", ExtMySQLParts, ExtMySQL},
	} {
		single, err := ArtifactNameToken(j, tc.engine, start, "0a1b2c3d")
		if err != nil {
			t.Fatal(err)
		}
		name, err := ToParts(single)
		if err != nil || !strings.HasSuffix(name, tc.ext) || Multipart(single) {
			t.Fatalf("%s: ToParts(%s) = %s, %v", tc.engine, single, name, err)
		}
		for _, n := range []string{name, name + ExtEncrypted} {
			if !Multipart(n) || PartExtension(n) != tc.partExt {
				t.Errorf("%s: Multipart %v, PartExtension %q", n, Multipart(n), PartExtension(n))
			}
			at, eng, err := ParseArtifactName(j, n)
			if err != nil || eng != tc.engine || !at.Equal(start) {
				t.Errorf("%s: parsed %v %s %v", n, at, eng, err)
			}
		}
	}
	if _, err := ToParts("shop_orders_20261206T100000.000Z-0a1b2c3d" + ExtPostgresBase); err == nil {
		t.Error("a physical base became a multi-part name")
	}
}
