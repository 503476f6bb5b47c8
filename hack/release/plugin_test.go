package release

import (
	"archive/tar"
	"compress/gzip"
	"crypto/sha256"
	"encoding/hex"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"sigs.k8s.io/yaml"
)

// An archive holds the binary (executable) and the docs, and the manifest
// names each archive with the SHA-256 of its bytes.
func TestPluginArchiveAndKrewManifest(t *testing.T) {
	dir := t.TempDir()
	bin := filepath.Join(dir, "bin")
	doc := filepath.Join(dir, "plugin.md")
	if err := os.WriteFile(bin, []byte("#!binary"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(doc, []byte("# kubectl cairn"), 0o644); err != nil {
		t.Fatal(err)
	}
	var archives []PluginArchive
	for _, p := range PluginPlatforms {
		a, err := WritePluginArchive(dir, "v0.1.0", p, bin, []ArchiveFile{{Name: "README.md", Path: doc, Mode: 0o644}, {Name: "kubectl_complete-cairn", Path: bin, Mode: 0o755}})
		if err != nil {
			t.Fatal(err)
		}
		b, err := os.ReadFile(filepath.Join(dir, a.File))
		if err != nil {
			t.Fatal(err)
		}
		if sum := sha256.Sum256(b); hex.EncodeToString(sum[:]) != a.SHA256 {
			t.Fatalf("%s: sha256 %s, the file's is %x", a.File, a.SHA256, sum)
		}
		gz, err := gzip.NewReader(strings.NewReader(string(b)))
		if err != nil {
			t.Fatal(err)
		}
		tr := tar.NewReader(gz)
		files := map[string]int64{}
		for {
			h, err := tr.Next()
			if err == io.EOF {
				break
			}
			if err != nil {
				t.Fatal(err)
			}
			files[h.Name] = h.Mode
		}
		if files[Plugin] != 0o755 || files["README.md"] != 0o644 || files["kubectl_complete-cairn"] != 0o755 {
			t.Fatalf("%s holds %v", a.File, files)
		}
		archives = append(archives, a)
	}
	m, err := KrewManifest("v0.1.0", archives)
	if err != nil {
		t.Fatal(err)
	}
	var got struct {
		Kind string
		Spec struct {
			Version   string
			Platforms []struct {
				Selector         struct{ MatchLabels map[string]string }
				URI, SHA256, Bin string
			}
		}
	}
	if err := yaml.Unmarshal(m, &got); err != nil {
		t.Fatal(err)
	}
	if got.Kind != "Plugin" || got.Spec.Version != "v0.1.0" || len(got.Spec.Platforms) != 4 {
		t.Fatalf("manifest:\n%s", m)
	}
	for i, p := range got.Spec.Platforms {
		a := archives[i]
		if p.SHA256 != a.SHA256 || p.Bin != Plugin || !strings.HasSuffix(p.URI, "/kubectl-cairn/v0.1.0/"+a.File) ||
			p.Selector.MatchLabels["os"] != a.Platform.OS || p.Selector.MatchLabels["arch"] != a.Platform.Arch {
			t.Fatalf("platform %d: %+v, archive %+v", i, p, a)
		}
	}
	if Latest([]string{"kubectl-cairn/v0.1.0", "operators/backup/v0.9.0"}, Plugin) != "v0.1.0" {
		t.Fatal("the plugin's tags are kubectl-cairn/v*")
	}
}
