package store

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"strings"
	"time"
)

// PVC stores objects as files under a mounted directory. Writes go to a
// hidden temporary file in the destination directory, are fsynced, then
// renamed into place (and the directory fsynced), so a reader sees either
// nothing or the complete file.
type PVC struct {
	Root string
}

// NewPVC returns a store rooted at a mount path.
func NewPVC(root string) (*PVC, error) {
	if root == "" {
		return nil, errors.New("pvc store: mount path is empty (set CAIRN_PVC_PATH or --pvc-path)")
	}
	return &PVC{Root: filepath.Clean(root)}, nil
}

func (p *PVC) String() string { return "pvc " + p.Root }

func (p *PVC) Path(key string) string { return key }

func (p *PVC) file(key string) (string, error) {
	clean := path.Clean("/" + key)[1:]
	if clean == "" || clean != key || strings.HasPrefix(key, "../") {
		return "", fmt.Errorf("pvc store: invalid key %q", key)
	}
	return filepath.Join(p.Root, filepath.FromSlash(key)), nil
}

func (p *PVC) Check(ctx context.Context) error {
	fi, err := os.Stat(p.Root)
	if errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("pvc store unreachable: mount path %s does not exist (is the volume mounted?)", p.Root)
	}
	if err != nil {
		return fmt.Errorf("pvc store unreachable: %w", err)
	}
	if !fi.IsDir() {
		return fmt.Errorf("pvc store unreachable: mount path %s is not a directory", p.Root)
	}
	return nil
}

func (p *PVC) Put(ctx context.Context, key string, r io.Reader) (n int64, err error) {
	dst, err := p.file(key)
	if err != nil {
		return 0, err
	}
	if err := p.Check(ctx); err != nil {
		return 0, err
	}
	dir := filepath.Dir(dst)
	if err := os.MkdirAll(dir, 0o750); err != nil {
		return 0, fmt.Errorf("pvc store: %w", err)
	}
	tmp, err := os.CreateTemp(dir, "."+filepath.Base(dst)+".partial-*")
	if err != nil {
		return 0, fmt.Errorf("pvc store: %w", err)
	}
	defer func() {
		if err != nil {
			tmp.Close()
			os.Remove(tmp.Name())
		}
	}()
	buf := make([]byte, 1<<20)
	n, err = io.CopyBuffer(onlyWriter{tmp}, ctxReader{ctx, r}, buf)
	if err != nil {
		return n, err
	}
	if err = tmp.Sync(); err != nil {
		return n, fmt.Errorf("pvc store: sync %s: %w", tmp.Name(), err)
	}
	if err = tmp.Close(); err != nil {
		return n, fmt.Errorf("pvc store: %w", err)
	}
	if err = os.Chmod(tmp.Name(), 0o640); err != nil {
		return n, fmt.Errorf("pvc store: %w", err)
	}
	if err = os.Rename(tmp.Name(), dst); err != nil {
		return n, fmt.Errorf("pvc store: %w", err)
	}
	if err = syncDir(dir); err != nil {
		return n, fmt.Errorf("pvc store: sync directory %s: %w", dir, err)
	}
	return n, nil
}

func (p *PVC) Get(ctx context.Context, key string) (io.ReadCloser, error) {
	name, err := p.file(key)
	if err != nil {
		return nil, err
	}
	if err := p.Check(ctx); err != nil {
		return nil, err
	}
	f, err := os.Open(name)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("pvc store: %s: %w", key, ErrNotFound)
	}
	if err != nil {
		return nil, fmt.Errorf("pvc store: %w", err)
	}
	return f, nil
}

func (p *PVC) Delete(ctx context.Context, key string) error {
	name, err := p.file(key)
	if err != nil {
		return err
	}
	if err := os.Remove(name); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("pvc store: %w", err)
	}
	return nil
}

func (p *PVC) List(ctx context.Context, dir string) ([]Object, error) {
	if err := p.Check(ctx); err != nil {
		return nil, err
	}
	base, err := p.file(dir)
	if err != nil {
		return nil, err
	}
	var out []Object
	err = filepath.WalkDir(base, func(name string, d fs.DirEntry, err error) error {
		if err != nil {
			if errors.Is(err, fs.ErrNotExist) {
				// Removed since its directory was read (a concurrent
				// run's temporary file, a pruned artifact): not there.
				if name == base {
					return fs.SkipAll
				}
				return nil
			}
			return err
		}
		if d.IsDir() {
			return nil
		}
		fi, err := d.Info()
		if errors.Is(err, fs.ErrNotExist) {
			return nil
		}
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(p.Root, name)
		if err != nil {
			return err
		}
		out = append(out, Object{Key: filepath.ToSlash(rel), Size: fi.Size(), ModTime: fi.ModTime()})
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("pvc store: %w", err)
	}
	return out, nil
}

// AbortIncomplete has nothing to do: interrupted writes are hidden files
// that List returns.
func (p *PVC) AbortIncomplete(ctx context.Context, dir string, before time.Time, keep func(string) bool) (int, error) {
	return 0, nil
}

// RemoveDir removes dir and its parents up to the root while they are empty.
func (p *PVC) RemoveDir(dir string) error {
	for dir != "" && dir != "." {
		name, err := p.file(dir)
		if err != nil {
			return err
		}
		if err := os.Remove(name); err != nil {
			if errors.Is(err, fs.ErrNotExist) {
				dir = path.Dir(dir)
				continue
			}
			return nil // not empty: leave it
		}
		dir = path.Dir(dir)
	}
	return nil
}

func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	return d.Sync()
}

// onlyWriter hides ReadFrom so CopyBuffer uses our buffer size.
type onlyWriter struct{ w io.Writer }

func (o onlyWriter) Write(b []byte) (int, error) { return o.w.Write(b) }

// ctxReader fails reads once ctx is done.
type ctxReader struct {
	ctx context.Context
	r   io.Reader
}

func (c ctxReader) Read(b []byte) (int, error) {
	if err := c.ctx.Err(); err != nil {
		return 0, err
	}
	return c.r.Read(b)
}
