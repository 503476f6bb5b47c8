package cli

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"cairn.dev/agent/contract"
	"cairn.dev/agent/internal/catalog"
	"cairn.dev/agent/internal/naming"
)

// A store written by agents before manifests keeps working: its
// catalog.json entries are listed and pruned, the file is never rewritten,
// and it goes once it lists nothing present.
func TestLegacyCatalogCompatible(t *testing.T) {
	dir := t.TempDir()
	job := naming.Job{Namespace: "shop", Name: "orders"}
	env := map[string]string{"CAIRN_BACKUPJOB": job.String(), "CAIRN_STORE": "pvc", "CAIRN_PVC_PATH": dir,
		"CAIRN_TERMINATION_LOG": filepath.Join(dir, "tl"), "CAIRN_RETENTION_DAYS": "7"}
	now := time.Date(2026, 5, 6, 7, 8, 9, 0, time.UTC) // run's clock
	mk := func(at time.Time, token string) catalog.Entry {
		name, err := naming.ArtifactNameToken(job, "postgres", at, token)
		if err != nil {
			t.Fatal(err)
		}
		write(t, filepath.Join(dir, job.Key(name)), "data of "+name)
		return catalog.Entry{Name: name, Size: 1, Checksum: "sha256:" + strings.Repeat("0", 64), Start: at, End: at,
			Engine: "postgres", Format: "pg_dump-custom", Compression: "zstd"}
	}
	old, recent := mk(now.AddDate(0, -2, 0), ""), mk(now.AddDate(0, 0, -1), "")
	legacy := catalog.New(job)
	legacy.Entries = []catalog.Entry{old, recent}
	legacyBytes := legacy.Encode()
	write(t, filepath.Join(dir, job.CatalogKey()), string(legacyBytes))
	fresh := mk(now.Add(-time.Hour), "0123abcd")
	m, err := catalog.EncodeManifest(job, fresh)
	if err != nil {
		t.Fatal(err)
	}
	write(t, filepath.Join(dir, job.ManifestKey(fresh.Name)), string(m))

	listed := func() []string {
		t.Helper()
		code, out, errOut := run(t, env, "list")
		if code != 0 {
			t.Fatalf("list: exit %d: %s", code, errOut)
		}
		var names []string
		for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
			var r contract.Result
			if err := json.Unmarshal([]byte(line), &r); err != nil {
				t.Fatalf("list line %q: %v", line, err)
			}
			names = append(names, filepath.Base(r.Artifact))
		}
		return names
	}
	if got := listed(); strings.Join(got, " ") != strings.Join([]string{old.Name, recent.Name, fresh.Name}, " ") {
		t.Fatalf("listed %v", got)
	}
	if code, _, errOut := run(t, env, "prune"); code != 0 {
		t.Fatalf("prune: %s", errOut)
	}
	if got := listed(); strings.Join(got, " ") != recent.Name+" "+fresh.Name {
		t.Fatalf("after prune listed %v, want the two recent ones", got)
	}
	if _, err := os.Stat(filepath.Join(dir, job.Key(old.Name))); !os.IsNotExist(err) {
		t.Fatalf("expired legacy artifact still there: %v", err)
	}
	if b, _ := os.ReadFile(filepath.Join(dir, job.CatalogKey())); string(b) != string(legacyBytes) {
		t.Fatalf("catalog.json was rewritten:\n%s", b)
	}
	// Once it lists nothing present, and is old, prune removes it.
	os.Remove(filepath.Join(dir, job.Key(recent.Name)))
	long := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	if err := os.Chtimes(filepath.Join(dir, job.CatalogKey()), long, long); err != nil {
		t.Fatal(err)
	}
	if code, _, errOut := run(t, env, "prune"); code != 0 {
		t.Fatalf("prune: %s", errOut)
	}
	if _, err := os.Stat(filepath.Join(dir, job.CatalogKey())); !os.IsNotExist(err) {
		t.Fatalf("unused catalog.json kept: %v", err)
	}
	if got := listed(); len(got) != 1 || got[0] != fresh.Name {
		t.Fatalf("listed %v, want only %s", got, fresh.Name)
	}
}

func write(t *testing.T, name, data string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(name), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(name, []byte(data), 0o644); err != nil {
		t.Fatal(err)
	}
}
