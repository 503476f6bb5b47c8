// Command release runs the steps of `make release OPERATOR=<name>
// VERSION=vX.Y.Z` (hack/make/release.mk):
//
//	release check  -root DIR -operator NAME -version vX.Y.Z   semver, newer than the last tag, clean paths
//	release render -root DIR -operator NAME -version vX.Y.Z   writes dist/NAME-vX.Y.Z.yaml
//	release tag    -root DIR -operator NAME -version vX.Y.Z   creates the local tag operators/NAME/vX.Y.Z
package main

import (
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"slices"

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
	ops, err := release.Operators(*root)
	if err != nil {
		return err
	}
	if !slices.Contains(ops, *op) {
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
		if err := release.CheckClean(*root, *op); err != nil {
			return err
		}
		fmt.Printf("release: %s %s (last: %s)\n", *op, *version, orNone(release.Latest(tags, *op)))
	case "render":
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
		return fmt.Errorf("%w: unknown step %q (check, render, tag)", release.ErrUsage, step)
	}
	return nil
}

func orNone(s string) string {
	if s == "" {
		return "none"
	}
	return s
}
