package pitr

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"strings"
	"syscall"
)

// serve answers the restore_command's requests: a segment of the chain is
// fetched from the store, checked against its record, and written where
// the server asked (inside its data directory); anything else is "not
// archived" (the server then ends recovery, or tries another timeline).
func (r *Recovery) serve(ctx context.Context) {
	defer r.wg.Done()
	inChain := map[string]Segment{}
	for _, s := range r.chain {
		inChain[s.File] = s
	}
	for {
		c, err := r.ln.Accept()
		if err != nil {
			return
		}
		func() {
			defer c.Close()
			line, err := bufio.NewReader(c).ReadString('\n')
			if err != nil {
				return
			}
			name, dst, _ := strings.Cut(strings.TrimSpace(line), "\t")
			s, ok := inChain[name]
			if !ok {
				fmt.Fprintf(c, "NO %s is not in this recovery's chain\n", name)
				return
			}
			if err := r.place(ctx, s, dst); err != nil {
				r.log.Warn("restore_command: fetching a segment failed", "segment", name, "err", err)
				fmt.Fprintf(c, "NO %s\n", strings.ReplaceAll(err.Error(), "\n", " "))
				return
			}
			r.mu.Lock()
			r.fetched = append(r.fetched, name)
			r.mu.Unlock()
			fmt.Fprintf(c, "OK\n")
		}()
	}
}

// WALFetch is `agent wal-fetch <socket> <file> <path>`, the temporary
// server's restore_command: it asks the restoring agent (listening on
// socket) for segment file, written to path (relative to the server's
// data directory, its working directory). Exit status 0: restored; 1: not
// available (PostgreSQL then ends recovery or looks elsewhere).
func WALFetch(args []string, stderr io.Writer) int {
	if len(args) != 3 {
		fmt.Fprintln(stderr, "usage: agent wal-fetch <socket> <file> <path>")
		return 2
	}
	dst := args[2]
	if !filepath.IsAbs(dst) {
		wd, err := os.Getwd()
		if err != nil {
			fmt.Fprintln(stderr, err)
			return 1
		}
		dst = filepath.Join(wd, dst)
	}
	c, err := net.Dial("unix", args[0])
	if err != nil {
		fmt.Fprintln(stderr, "wal-fetch:", err)
		return 1
	}
	defer c.Close()
	fmt.Fprintf(c, "%s\t%s\n", args[1], dst)
	reply, _ := bufio.NewReader(c).ReadString('\n')
	if strings.TrimSpace(reply) == "OK" {
		return 0
	}
	fmt.Fprintf(stderr, "wal-fetch %s: %s\n", args[1], strings.TrimSpace(strings.TrimPrefix(reply, "NO ")))
	return 1
}

// place fetches segment s (checked against its record) and puts it at dst,
// which must be inside the data directory — resolved, not only by name:
// the path may not leave it, nor pass through a symbolic link (the
// temporary server, or the base, could have put one there), nor be one.
// The segment is decrypted into the agent's own private folder first,
// then copied through an os.Root of the data directory and renamed into
// place there.
func (r *Recovery) place(ctx context.Context, s Segment, dst string) error {
	rel, err := filepath.Rel(r.DataDir, filepath.Clean(dst))
	if err != nil || !filepath.IsLocal(rel) {
		return fmt.Errorf("%s is outside the data directory", dst)
	}
	root, err := os.OpenRoot(r.DataDir)
	if err != nil {
		return err
	}
	defer root.Close()
	if err := noLinkOnTheWay(root, rel); err != nil {
		return fmt.Errorf("%s: %w", dst, err)
	}
	private, err := os.MkdirTemp("", "cairn-walfetch-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(private)
	local := filepath.Join(private, "segment")
	if err := fetch(ctx, r.st, r.dir, s, local, r.ids); err != nil {
		return err
	}
	in, err := os.Open(local)
	if err != nil {
		return err
	}
	defer in.Close()
	tmp := rel + ".cairn-fetch"
	root.Remove(tmp)
	out, err := root.OpenFile(tmp, os.O_CREATE|os.O_EXCL|os.O_WRONLY|syscall.O_NOFOLLOW, 0o600)
	if err != nil {
		return fmt.Errorf("%s: %w", dst, err)
	}
	if _, err := io.Copy(out, in); err != nil {
		out.Close()
		root.Remove(tmp)
		return err
	}
	if r.asUser {
		if err := out.Chown(r.uid, r.gid); err != nil {
			out.Close()
			root.Remove(tmp)
			return err
		}
	}
	if err := out.Close(); err != nil {
		root.Remove(tmp)
		return err
	}
	if err := root.Rename(tmp, rel); err != nil {
		root.Remove(tmp)
		return err
	}
	return nil
}
