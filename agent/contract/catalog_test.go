package contract

import (
	"fmt"
	"strings"
	"testing"
	"time"
)

func TestMarshalCatalogKeepsTheNewestThatFit(t *testing.T) {
	c := Catalog{Summary: Summary{Command: "list", BackupJob: "shop/orders-db", Count: 500}}
	end := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	for i := range 500 {
		c.Artifacts = append(c.Artifacts, CatalogEntry{
			Path:     fmt.Sprintf("cairn/shop/orders-db/shop_orders-db_%04d.pgdump.zst", 500-i),
			Size:     123456789,
			Checksum: "sha256:" + strings.Repeat("ab", 32),
			End:      end.Add(-time.Duration(i) * time.Minute), Engine: "postgres", Tables: 3, Rows: 62000,
		})
	}
	b, err := MarshalCatalog(c)
	if err != nil {
		t.Fatal(err)
	}
	if len(b) > MaxMessageBytes {
		t.Fatalf("%d bytes, want at most %d", len(b), MaxMessageBytes)
	}
	got, err := ParseCatalog(string(b))
	if err != nil {
		t.Fatal(err)
	}
	if got.Count != 500 || len(got.Artifacts) < 10 || got.Artifacts[0].Path != c.Artifacts[0].Path {
		t.Fatalf("count %d, %d artifacts, first %+v: want 500, at least 10, the newest first", got.Count, len(got.Artifacts), got.Artifacts[0])
	}
	// The Summary's readers read it unchanged.
	if !strings.Contains(string(b), `"command":"list","backupJob":"shop/orders-db","count":500`) {
		t.Fatalf("summary fields not inline: %.200s", b)
	}
	if _, err := ParseCatalog(`{"error":"list failed: store unreachable"}`); err == nil || !strings.Contains(err.Error(), "store unreachable") {
		t.Fatalf("failure: %v", err)
	}
}
