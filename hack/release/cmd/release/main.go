// Command release runs the steps of `make release OPERATOR=<name>
// VERSION=vX.Y.Z` (hack/make/release.mk):
//
//	release check  -root DIR -operator NAME -version vX.Y.Z   semver, newer than the last tag, clean paths
//	release render -root DIR -operator NAME -version vX.Y.Z   writes dist/NAME-vX.Y.Z.yaml
//	release tag    -root DIR -operator NAME -version vX.Y.Z   creates the local tag operators/NAME/vX.Y.Z
//
// and of `make release-plugin VERSION=vX.Y.Z` (NAME kubectl-cairn: check,
// then plugin, then tag kubectl-cairn/vX.Y.Z):
//
//	release plugin -root DIR -version vX.Y.Z   builds dist/kubectl-cairn_vX.Y.Z_<os>_<arch>.tar.gz for
//	                                           linux/amd64, linux/arm64, darwin/amd64, darwin/arm64, the
//	                                           krew manifest dist/kubectl-cairn-vX.Y.Z.yaml and dist/kubectl-cairn-vX.Y.Z.sha256
package main

import (
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"cairn.dev/hack/release"
)

func main() {
	if err := run(os.Args[1:]); err != nil {
		fmt.Fprintln(os.Stderr, "release:", err)
		os.Exit(1)
	}
}

func run(args []string) error {
	if len(args) == 0 {
		return fmt.Errorf("%w: release check|render|tag -root DIR -operator NAME -version vX.Y.Z", release.ErrUsage)
	}
	step := args[0]
	fs := flag.NewFlagSet("release "+step, flag.ContinueOnError)
	root := fs.String("root", ".", "Repository root.")
	op := fs.String("operator", "", "Operator to release (one with a base in deploy/).")
	version := fs.String("version", "", "Version to release, vX.Y.Z.")
	if err := fs.Parse(args[1:]); err != nil {
		return err
	}
	if step == "plugin" {
		return plugin(*root, *version)
	}
	ops, err := release.Operators(*root)
	if err != nil {
		return err
	}
	if !slices.Contains(ops, *op) && *op != release.Plugin {
		return fmt.Errorf("OPERATOR=%q: must be one of %v (operators with a base in deploy/)", *op, ops)
	}
	switch step {
	case "check":
		tags, err := release.GitTags(*root, *op)
		if err != nil {
			return err
		}
		if err := release.CheckVersion(tags, *op, *version); err != nil {
			return err
		}
		clean := release.CheckClean
		if *op == release.Plugin {
			clean = func(dir, _ string) error { return release.CheckPluginClean(dir) }
		}
		if err := clean(*root, *op); err != nil {
			return err
		}
		fmt.Printf("release: %s %s (last: %s)\n", *op, *version, orNone(release.Latest(tags, *op)))
	case "render":
		if *op == release.Plugin {
			return fmt.Errorf("%w: the plugin has no manifest to render: release plugin", release.ErrUsage)
		}
		out, err := release.Render(*root, *op, *version)
		if err != nil {
			return err
		}
		path := filepath.Join(*root, release.DistFile(*op, *version))
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			return err
		}
		if err := os.WriteFile(path, out, 0o644); err != nil {
			return err
		}
		fmt.Printf("release: wrote %s\n", path)
	case "tag":
		if err := release.CreateTag(*root, *op, *version); err != nil {
			return err
		}
		fmt.Printf("release: tagged %s (push it with: git push origin %s)\n", release.Tag(*op, *version), release.Tag(*op, *version))
	default:
		return fmt.Errorf("%w: unknown step %q (check, render, tag, plugin)", release.ErrUsage, step)
	}
	return nil
}

// plugin builds the plugin's archives, their checksums and the krew manifest.
func plugin(root, version string) error {
	if err := release.ValidVersion(version); err != nil {
		return err
	}
	dist := filepath.Join(root, "dist")
	tmp, err := os.MkdirTemp("", "kubectl-cairn-release-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(tmp)
	if err := os.MkdirAll(dist, 0o755); err != nil {
		return err
	}
	var archives []release.PluginArchive
	var sums strings.Builder
	for _, p := range release.PluginPlatforms {
		bin := filepath.Join(tmp, p.OS+"-"+p.Arch, release.Plugin)
		if err := release.BuildPlugin(root, version, p, bin); err != nil {
			return err
		}
		a, err := release.WritePluginArchive(dist, version, p, bin, release.PluginFiles(root))
		if err != nil {
			return err
		}
		archives = append(archives, a)
		fmt.Fprintf(&sums, "%s  %s\n", a.SHA256, a.File)
		fmt.Printf("release: wrote dist/%s (sha256 %s)\n", a.File, a.SHA256)
	}
	manifest, err := release.KrewManifest(version, archives)
	if err != nil {
		return err
	}
	name := filepath.Join(dist, release.Plugin+"-"+version)
	if err := os.WriteFile(name+".yaml", manifest, 0o644); err != nil {
		return err
	}
	if err := os.WriteFile(name+".sha256", []byte(sums.String()), 0o644); err != nil {
		return err
	}
	fmt.Printf("release: wrote %s.yaml (krew manifest) and %s.sha256\n", name, name)
	return nil
}

func orNone(s string) string {
	if s == "" {
		return "none"
	}
	return s
}
