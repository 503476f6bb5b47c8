package pitr

import (
	"archive/tar"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"
)

// untar unpacks a base backup's tar stream into dir: directories, regular
// files and symbolic links, each inside dir. The archive is not trusted
// (whoever can write the store, or a source superuser shaping the data
// directory, shapes it): every write goes through an os.Root of dir (no
// path may leave it, whatever the links say), a name that leaves dir
// lexically or passes through a symbolic link — one the archive created
// earlier — is refused, so is a link whose target is absolute or leaves
// dir, and a file is opened with O_NOFOLLOW (an archive link in its place
// is never written through). Hard links and devices are refused (a
// pg_basebackup tar has none). Modes keep their permission bits only.
func untar(r io.Reader, dir string) error {
	root, err := os.OpenRoot(dir)
	if err != nil {
		return err
	}
	defer root.Close()
	tr := tar.NewReader(r)
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			// Whatever follows the archive's end (zero blocks) is read
			// too, so the stream's checksum covers it.
			_, err = io.Copy(io.Discard, r)
			return err
		}
		if err != nil {
			return fmt.Errorf("reading the base backup: %w", err)
		}
		name, err := entryName(h.Name)
		if err != nil {
			return err
		}
		if name == "." {
			continue
		}
		if err := noLinkOnTheWay(root, name); err != nil {
			return fmt.Errorf("the base backup holds %q: %w", h.Name, err)
		}
		mode := os.FileMode(h.Mode).Perm()
		switch h.Typeflag {
		case tar.TypeDir:
			if err := root.MkdirAll(name, 0o700); err != nil {
				return err
			}
		case tar.TypeReg:
			if err := root.MkdirAll(filepath.Dir(name), 0o700); err != nil {
				return err
			}
			f, err := root.OpenFile(name, os.O_CREATE|os.O_WRONLY|os.O_TRUNC|syscall.O_NOFOLLOW, mode|0o600)
			if err != nil {
				return fmt.Errorf("the base backup holds %q: %w", h.Name, err)
			}
			if _, err := io.Copy(f, tr); err != nil {
				f.Close()
				return fmt.Errorf("reading the base backup: %w", err)
			}
			if err := f.Close(); err != nil {
				return err
			}
		case tar.TypeSymlink:
			target := h.Linkname
			resolved := filepath.Join(filepath.Dir(name), target)
			if target == "" || filepath.IsAbs(target) || resolved == ".." || strings.HasPrefix(resolved, ".."+string(filepath.Separator)) {
				return fmt.Errorf("the base backup holds a link %q to %q, outside its folder", h.Name, h.Linkname)
			}
			if err := root.MkdirAll(filepath.Dir(name), 0o700); err != nil {
				return err
			}
			if err := root.Symlink(target, name); err != nil {
				return err
			}
		default:
			return fmt.Errorf("the base backup holds %q of an unexpected type %q", h.Name, h.Typeflag)
		}
	}
}

// entryName cleans a stored name, refusing one that is absolute or leaves
// its folder.
func entryName(stored string) (string, error) {
	name := filepath.Clean(stored)
	if filepath.IsAbs(name) || name == ".." || strings.HasPrefix(name, ".."+string(filepath.Separator)) {
		return "", fmt.Errorf("the base backup holds %q, outside its folder", stored)
	}
	return name, nil
}

// errThroughLink: a name passes through a symbolic link.
var errThroughLink = errors.New("its path passes through a symbolic link")

// noLinkOnTheWay checks that every folder on the way to name (relative to
// root) that exists is a real folder, not a symbolic link.
func noLinkOnTheWay(root *os.Root, name string) error {
	parts := strings.Split(name, string(filepath.Separator))
	for i := 1; i < len(parts); i++ {
		fi, err := root.Lstat(filepath.Join(parts[:i]...))
		if errors.Is(err, fs.ErrNotExist) {
			return nil
		}
		if err != nil {
			return err
		}
		if fi.Mode()&fs.ModeSymlink != 0 {
			return fmt.Errorf("%w (%s)", errThroughLink, filepath.Join(parts[:i]...))
		}
		if !fi.IsDir() {
			return fmt.Errorf("%s is not a folder", filepath.Join(parts[:i]...))
		}
	}
	return nil
}
