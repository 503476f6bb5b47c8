package release

import (
	"archive/tar"
	"compress/gzip"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"

	"sigs.k8s.io/yaml"
)

// The kubectl plugin is released on its own, like an operator: its module
// is kubectl-cairn/ and its tags kubectl-cairn/vX.Y.Z.
const (
	// Plugin is the plugin's module folder, binary name and tag prefix.
	Plugin = "kubectl-cairn"
	// PluginKrewName is its name in a krew index (`kubectl krew install cairn`).
	PluginKrewName = "cairn"
	// PluginDownloadBase is where a release's archives are published.
	PluginDownloadBase = "https://github.com/cairn-dev/cairn/releases/download"
)

// PluginPlatform is one os/arch the plugin is built for.
type PluginPlatform struct{ OS, Arch string }

// PluginPlatforms are the platforms of every plugin release.
var PluginPlatforms = []PluginPlatform{{"linux", "amd64"}, {"linux", "arm64"}, {"darwin", "amd64"}, {"darwin", "arm64"}}

// PluginArchive is one built archive.
type PluginArchive struct {
	Platform PluginPlatform
	// File is the archive's name in dist/; SHA256 its checksum (hex).
	File, SHA256 string
}

// PluginTag is the plugin's release tag at version.
func PluginTag(version string) string { return Tag(Plugin, version) }

// PluginArchiveName names the archive of version for p.
func PluginArchiveName(version string, p PluginPlatform) string {
	return fmt.Sprintf("%s_%s_%s_%s.tar.gz", Plugin, version, p.OS, p.Arch)
}

// BuildPlugin builds the static plugin binary of version for p into out
// (CGO off, -trimpath, stripped, the version stamped).
func BuildPlugin(root, version string, p PluginPlatform, out string) error {
	cmd := exec.Command("go", "build", "-trimpath", "-ldflags", "-s -w -X main.version="+version, "-o", out, ".")
	cmd.Dir = filepath.Join(root, Plugin)
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0", "GOOS="+p.OS, "GOARCH="+p.Arch)
	if b, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("building %s for %s/%s: %w: %s", Plugin, p.OS, p.Arch, err, b)
	}
	return nil
}

// ArchiveFile is a file put in a plugin archive beside the binary.
type ArchiveFile struct {
	Name, Path string
	Mode       int64
}

// PluginFiles are the files of every archive besides the binary, from root:
// the plugin's page as README.md and kubectl's completion hook.
func PluginFiles(root string) []ArchiveFile {
	return []ArchiveFile{
		{Name: "README.md", Path: filepath.Join(root, "docs", "plugin.md"), Mode: 0o644},
		{Name: "kubectl_complete-cairn", Path: filepath.Join(root, Plugin, "kubectl_complete-cairn"), Mode: 0o755},
	}
}

// WritePluginArchive writes dist/<PluginArchiveName> holding the binary
// (as kubectl-cairn) and files, and returns it with its SHA-256.
func WritePluginArchive(dist, version string, p PluginPlatform, binary string, files []ArchiveFile) (PluginArchive, error) {
	a := PluginArchive{Platform: p, File: PluginArchiveName(version, p)}
	f, err := os.Create(filepath.Join(dist, a.File))
	if err != nil {
		return a, err
	}
	defer f.Close()
	sum := sha256.New()
	gz := gzip.NewWriter(io.MultiWriter(f, sum))
	tw := tar.NewWriter(gz)
	add := func(name, path string, mode int64) error {
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		if err := tw.WriteHeader(&tar.Header{Name: name, Mode: mode, Size: int64(len(b)), Typeflag: tar.TypeReg}); err != nil {
			return err
		}
		_, err = tw.Write(b)
		return err
	}
	if err := add(Plugin, binary, 0o755); err != nil {
		return a, err
	}
	for _, f := range files {
		if err := add(f.Name, f.Path, f.Mode); err != nil {
			return a, err
		}
	}
	if err := tw.Close(); err != nil {
		return a, err
	}
	if err := gz.Close(); err != nil {
		return a, err
	}
	a.SHA256 = hex.EncodeToString(sum.Sum(nil))
	return a, f.Close()
}

// KrewManifest renders the krew plugin manifest (krew.googlecontainertools.github.com/v1alpha2
// Plugin) of version for archives: one platform each, with its URI and SHA-256.
func KrewManifest(version string, archives []PluginArchive) ([]byte, error) {
	type selector struct {
		MatchLabels map[string]string `json:"matchLabels"`
	}
	type platform struct {
		Selector selector `json:"selector"`
		URI      string   `json:"uri"`
		SHA256   string   `json:"sha256"`
		Bin      string   `json:"bin"`
	}
	var ps []platform
	for _, a := range archives {
		ps = append(ps, platform{
			Selector: selector{MatchLabels: map[string]string{"os": a.Platform.OS, "arch": a.Platform.Arch}},
			URI:      strings.Join([]string{PluginDownloadBase, PluginTag(version), a.File}, "/"),
			SHA256:   a.SHA256, Bin: Plugin,
		})
	}
	m := map[string]any{
		"apiVersion": "krew.googlecontainertools.github.com/v1alpha2",
		"kind":       "Plugin",
		"metadata":   map[string]string{"name": PluginKrewName},
		"spec": map[string]any{
			"version":          version,
			"homepage":         "https://github.com/cairn-dev/cairn",
			"shortDescription": "Cairn for the on-call engineer: status, backups, restore, verify, approve",
			"description": "kubectl cairn shows every database Cairn protects and what needs attention,\n" +
				"lists the backups in a store's catalog, runs a backup now, restores to a time,\n" +
				"verifies a ProtectionPlan, approves a migration's cutover and shows the agent's logs,\n" +
				"with your kubeconfig and your rights only.\n",
			"platforms": ps,
		},
	}
	return yaml.Marshal(m)
}

// CheckPluginClean fails if the plugin's paths have uncommitted changes.
func CheckPluginClean(dir string) error {
	out, err := git(dir, "status", "--porcelain", "--", Plugin, "apis", "libs")
	if err != nil {
		return err
	}
	if strings.TrimSpace(out) != "" {
		return fmt.Errorf("uncommitted changes in the plugin's paths; commit them before releasing:\n%s", out)
	}
	return nil
}
