package backup

import (
	"context"
	"log/slog"
	"os"
	"path/filepath"
	"testing"
	"time"

	"cairn.dev/agent/internal/config"
	"cairn.dev/agent/internal/naming"
	"cairn.dev/agent/internal/store"
)

// A running backup's marker is refreshed until the run stops it, then gone.
func TestMarkerRefreshedUntilStopped(t *testing.T) {
	dir := t.TempDir()
	job := naming.Job{Namespace: "shop", Name: "orders"}
	st, err := store.NewPVC(dir)
	if err != nil {
		t.Fatal(err)
	}
	b := &Runner{cfg: &config.Config{BackupJob: job}, log: slog.New(slog.DiscardHandler), now: time.Now,
		markerRefresh: 10 * time.Millisecond}
	name := "shop_orders_20260102T030405.123Z-0123abcd.pgdump.zst"
	stop, err := b.StartMarker(context.Background(), st, name, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	file := filepath.Join(dir, job.MarkerKey(name))
	first, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(30 * time.Second)
	for {
		b, err := os.ReadFile(file)
		if err == nil && string(b) != string(first) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("marker never refreshed: %s", first)
		}
		// The poll interval of a loop bounded by the deadline above, not a
		// wait for an assumed duration.
		time.Sleep(5 * time.Millisecond)
	}
	stop()
	if _, err := os.Stat(file); !os.IsNotExist(err) {
		t.Fatalf("marker left after stop: %v", err)
	}
}
