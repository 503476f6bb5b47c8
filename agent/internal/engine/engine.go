// Package engine runs the database's own dump and restore tools as child
// processes and streams their data: pg_dump (custom format) / pg_restore for
// PostgreSQL, mysqldump --single-transaction / mysql for MySQL and MariaDB.
//
// Passwords reach the tools through their environment (PGPASSWORD,
// MYSQL_PWD), never through arguments; the children get a minimal
// environment, not the agent's (which holds the store's credentials).
package engine

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
	"unicode"
	"unicode/utf8"
)

// Conn are the coordinates of a database.
type Conn struct {
	Host     string
	Port     int
	Database string
	User     string
	Password string
}

// Engine dumps a database to a stream and restores one from a stream.
type Engine interface {
	// Name is "postgres" or "mysql".
	Name() string
	// Format names the dump format for the catalog.
	Format() string
	// Dump writes the database's dump to w.
	Dump(ctx context.Context, w io.Writer) error
	// Prepare makes sure the target database exists before Restore.
	Prepare(ctx context.Context) error
	// Restore reads a dump from r into the database.
	Restore(ctx context.Context, r io.Reader) error
}

// CheckConn refuses coordinates that no tool can be given safely, whatever
// admission let through: a host that is not a host name or IP address (a
// socket directory, a host list, an option, spaces), and a control
// character in the host, database or user (a newline in a database name
// ends up on a line of its own in mysqldump's header comment, which the
// mysql client would run as a command). Everything else is passed as data
// (see connArgs), however it looks.
func CheckConn(c Conn) error {
	if c.Host != "" && !validHost(c.Host) {
		return fmt.Errorf("database host %q: want a host name or an IP address (letters, digits, '.', '-', '_'; not starting with '-')", c.Host)
	}
	for _, f := range []struct{ what, v string }{{"host", c.Host}, {"name", c.Database}, {"user", c.User}} {
		if i := strings.IndexFunc(f.v, unicode.IsControl); i >= 0 {
			return fmt.Errorf("database %s %q contains a control character at byte %d", f.what, f.v, i)
		}
		if !utf8.ValidString(f.v) {
			return fmt.Errorf("database %s %q is not valid UTF-8", f.what, f.v)
		}
	}
	return nil
}

func validHost(h string) bool {
	if net.ParseIP(h) != nil {
		return true
	}
	if len(h) > 253 || h[0] == '-' || h[0] == '.' {
		return false
	}
	for _, c := range h {
		if !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '.' || c == '-' || c == '_') {
			return false
		}
	}
	return true
}

// New returns the engine called name.
func New(name string, c Conn) (Engine, error) {
	if c.Host == "" {
		return nil, errors.New("database host is empty (set CAIRN_DB_HOST or --db-host)")
	}
	if c.Database == "" {
		return nil, errors.New("database name is empty (set CAIRN_DB_NAME or --db-name)")
	}
	if c.User == "" {
		return nil, errors.New("database user is empty (set CAIRN_DB_USER or --db-user)")
	}
	if err := CheckConn(c); err != nil {
		return nil, err
	}
	switch name {
	case "postgres":
		if c.Port == 0 {
			c.Port = 5432
		}
		return &Postgres{Conn: c, MaintenanceDB: "postgres"}, nil
	case "mysql":
		if c.Port == 0 {
			c.Port = 3306
		}
		return &MySQL{Conn: c}, nil
	}
	return nil, fmt.Errorf("unknown engine %q (want postgres or mysql)", name)
}

// childEnv is the environment of a tool: only what it needs.
func childEnv(extra ...string) []string {
	env := []string{}
	for _, k := range []string{"PATH", "HOME", "LANG", "LC_ALL", "TZ", "TMPDIR"} {
		if v, ok := os.LookupEnv(k); ok {
			env = append(env, k+"="+v)
		}
	}
	if _, ok := os.LookupEnv("PATH"); !ok {
		env = append(env, "PATH=/usr/local/bin:/usr/bin:/bin")
	}
	return append(env, extra...)
}

// StreamError is the error of run's stdin stream: the tool was killed
// before it could see the end of its input.
type StreamError struct {
	Tool string
	Err  error
}

func (e *StreamError) Error() string {
	return fmt.Sprintf("input of %s failed, %s killed before the end of its input: %v", e.Tool, e.Tool, e.Err)
}

func (e *StreamError) Unwrap() error { return e.Err }

// run runs a tool with stdin and stdout wired to the given streams. On
// failure the error carries the tool's last stderr lines, with secret
// removed.
//
// stdin is copied into the tool through a pipe run owns. If reading stdin
// fails, the tool is killed (SIGKILL) before its end of the pipe is
// closed, so it never sees a clean end of input: a restore tool must not
// take a broken stream for a complete one and commit what it read. The
// error is then a *StreamError wrapping stdin's error.
func run(ctx context.Context, secret string, stdin io.Reader, stdout io.Writer, env []string, name string, args ...string) error {
	path, err := lookTool(name)
	if err != nil {
		return err
	}
	cmd := exec.CommandContext(ctx, path, args...)
	cmd.Env = env
	// stdout is read through a pipe run owns, grown to pipeSize: the tool
	// writes ahead while the agent compresses what it read (exec's own
	// pipe holds 64 KiB, so a dump tool stalls whenever the agent is busy
	// with a compression block), and read in 256 KiB pieces.
	var outR, outW *os.File
	switch f, isFile := stdout.(*os.File); {
	case stdout == nil:
	case isFile:
		cmd.Stdout = f
	default:
		if outR, outW, err = os.Pipe(); err != nil {
			return fmt.Errorf("%s: %w", name, err)
		}
		growPipe(outW)
		cmd.Stdout = outW
		defer outR.Close()
	}
	tail := &tailBuffer{max: 16 << 10}
	cmd.Stderr = tail
	cmd.SysProcAttr = sysProcAttr()
	// On cancellation ask the tool to stop, then kill it.
	cmd.Cancel = func() error { return cmd.Process.Signal(syscall.SIGTERM) }
	cmd.WaitDelay = 10 * time.Second

	var pw *os.File
	if stdin != nil {
		var pr *os.File
		if pr, pw, err = os.Pipe(); err != nil {
			return fmt.Errorf("%s: %w", name, err)
		}
		growPipe(pw)
		cmd.Stdin = pr
		defer pr.Close()
	}
	if err := cmd.Start(); err != nil {
		if pw != nil {
			pw.Close()
		}
		if outW != nil {
			outW.Close()
		}
		return fmt.Errorf("%s: %w", name, err)
	}
	outDone := make(chan error, 1)
	if outW != nil {
		outW.Close() // the child has its copy
		go func() {
			_, err := io.CopyBuffer(onlyWriter{stdout}, outR, make([]byte, 256<<10))
			// On a failed write the tool's next write fails (EPIPE), as
			// with exec's own pipe.
			outR.Close()
			outDone <- err
		}()
	} else {
		outDone <- nil
	}
	in := &readErr{r: stdin}
	copied := make(chan struct{})
	if pw != nil {
		cmd.Stdin.(*os.File).Close() // the child has its copy
		go func() {
			defer close(copied)
			io.CopyBuffer(onlyWriter{pw}, in, make([]byte, 256<<10))
			if in.get() != nil {
				// The input broke (not the tool): kill the tool first,
				// then close its input.
				cmd.Process.Kill()
			}
			pw.Close()
		}()
	} else {
		close(copied)
	}
	err = cmd.Wait()
	if pw != nil {
		// A tool that exited early stops reading: its input's next write
		// fails, or this close makes it fail.
		pw.Close()
		select {
		case <-copied:
		case <-time.After(cmd.WaitDelay):
		}
	}
	// The tool's output is read to its end (a process the tool left
	// behind holding it open is given WaitDelay, as exec does).
	var outErr error
	select {
	case outErr = <-outDone:
	case <-time.After(cmd.WaitDelay):
		outR.Close()
		outErr = <-outDone
	}
	if err == nil && outErr != nil {
		err = outErr
	}
	if serr := in.get(); serr != nil {
		return &StreamError{Tool: name, Err: serr}
	}
	if err == nil {
		return nil
	}
	if ctx.Err() != nil {
		return fmt.Errorf("%s interrupted: %w", name, context.Cause(ctx))
	}
	msg := Redact(lastLines(tail.String(), 3), secret)
	var exitErr *exec.ExitError
	if errors.As(err, &exitErr) {
		if msg == "" {
			return fmt.Errorf("%s failed (%s)", name, exitErr.ProcessState)
		}
		return fmt.Errorf("%s failed (%s): %s", name, exitErr.ProcessState, msg)
	}
	return fmt.Errorf("%s: %w", name, err)
}

// onlyWriter hides ReadFrom so that CopyBuffer uses its buffer.
type onlyWriter struct{ w io.Writer }

func (o onlyWriter) Write(b []byte) (int, error) { return o.w.Write(b) }

// readErr records the first error of its reader other than io.EOF.
type readErr struct {
	r   io.Reader
	mu  sync.Mutex
	err error
}

func (e *readErr) Read(b []byte) (int, error) {
	n, err := e.r.Read(b)
	if err != nil && err != io.EOF {
		e.mu.Lock()
		if e.err == nil {
			e.err = err
		}
		e.mu.Unlock()
	}
	return n, err
}

func (e *readErr) get() error {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.err
}

// aliases are the MariaDB names of the MySQL tools: newer MariaDB client
// packages ship only these.
var aliases = map[string]string{"mysqldump": "mariadb-dump", "mysql": "mariadb"}

func lookTool(name string) (string, error) {
	if p, ok := chosenTool(name); ok {
		return p, nil
	}
	if p, err := exec.LookPath(name); err == nil {
		return p, nil
	}
	if alias, ok := aliases[name]; ok {
		if p, err := exec.LookPath(alias); err == nil {
			return p, nil
		}
	}
	return "", fmt.Errorf("%s not found in PATH: install the database client tools", name)
}

// Redact removes secret from s. Very short secrets are not searched for:
// they would mangle ordinary words, and they are not sensibly secret.
func Redact(s, secret string) string {
	if len(secret) < 4 {
		return s
	}
	return strings.ReplaceAll(s, secret, "[REDACTED]")
}

func lastLines(s string, n int) string {
	var lines []string
	for _, l := range strings.Split(s, "\n") {
		if l = strings.TrimSpace(l); l != "" {
			lines = append(lines, l)
		}
	}
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "; ")
}

// tailBuffer keeps the last max bytes written to it.
type tailBuffer struct {
	max int
	buf bytes.Buffer
}

func (t *tailBuffer) Write(p []byte) (int, error) {
	t.buf.Write(p)
	if over := t.buf.Len() - t.max; over > 0 {
		t.buf.Next(over)
	}
	return len(p), nil
}

func (t *tailBuffer) String() string { return t.buf.String() }

func itoa(i int) string { return strconv.Itoa(i) }

// ToolVersion returns the first line of `<tool> --version`.
func ToolVersion(ctx context.Context, name string) (string, error) {
	path, err := lookTool(name)
	if err != nil {
		return "", err
	}
	cmd := exec.CommandContext(ctx, path, "--version")
	cmd.Env = childEnv() // nothing of the agent's secrets, as every tool
	out, err := cmd.Output()
	if err != nil {
		return "", fmt.Errorf("%s --version: %w", name, err)
	}
	line, _, _ := strings.Cut(string(out), "\n")
	return strings.TrimSpace(line), nil
}

// Pipe streams src's output into dst's input: the dump and restore tools
// of a direct copy, with nothing stored in between. If either side fails,
// the other is stopped; the first failure is returned (the dump's, when
// the restore failed only because its input broke).
func Pipe(ctx context.Context, src func(context.Context, io.Writer) error, dst func(context.Context, io.Reader) error, counted *atomic.Int64) error {
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	pr, pw := io.Pipe()
	srcErr := make(chan error, 1)
	go func() {
		var w io.Writer = pw
		if counted != nil {
			w = &countingWriter{w: pw, n: counted}
		}
		err := src(ctx, w)
		if err != nil {
			pw.CloseWithError(err)
			cancel(err)
		} else {
			pw.Close()
		}
		srcErr <- err
	}()
	dstErr := dst(ctx, pr)
	if dstErr != nil {
		pr.CloseWithError(dstErr)
		cancel(dstErr)
	}
	serr := <-srcErr
	if serr != nil {
		return serr
	}
	return dstErr
}

type countingWriter struct {
	w io.Writer
	n *atomic.Int64
}

func (c *countingWriter) Write(p []byte) (int, error) {
	n, err := c.w.Write(p)
	c.n.Add(int64(n))
	return n, err
}
