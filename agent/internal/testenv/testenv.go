// Package testenv starts real servers for the agent's data-path tests and
// benchmark: a private PostgreSQL 15, a private MariaDB and versitygw (a real
// S3 server), each in a temporary folder on a free loopback port and bound to
// 127.0.0.1 only. It also builds and runs the agent binary.
//
// A missing server binary is an error that says to run hack/agent-deps.sh;
// callers fail on it, they never skip.
package testenv

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
)

// Hint is appended to every "binary not found" error.
const Hint = "run hack/agent-deps.sh (as root) to install the agent's test dependencies"

// RepoRoot walks up from the working directory to the folder holding go.work.
func RepoRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.work")); err == nil {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", errors.New("no go.work above the working directory: run from inside the Cairn repository")
		}
		dir = parent
	}
}

// LookTool finds a tool in the repository's bin/tools, then in PATH.
func LookTool(name string) (string, error) {
	if root, err := RepoRoot(); err == nil {
		p := filepath.Join(root, "bin", "tools", name)
		if fi, err := os.Stat(p); err == nil && !fi.IsDir() && fi.Mode()&0o111 != 0 {
			return p, nil
		}
	}
	if p, err := exec.LookPath(name); err == nil {
		return p, nil
	}
	return "", fmt.Errorf("%s not found in bin/tools or PATH: %s", name, Hint)
}

// lookBinary finds an executable at one of the given paths or in PATH.
func lookBinary(name string, candidates ...string) (string, error) {
	for _, c := range candidates {
		if fi, err := os.Stat(c); err == nil && fi.Mode()&0o111 != 0 {
			return c, nil
		}
	}
	if p, err := exec.LookPath(name); err == nil {
		return p, nil
	}
	return "", fmt.Errorf("%s not found: %s", name, Hint)
}

// FreePort returns a TCP port that was free a moment ago on 127.0.0.1 and
// on every address (a server listening on ":port" needs both), and that no
// other caller of FreePort on this machine holds: each port handed out is
// reserved by an flock on a file named after it (reservePort), held until
// the process exits, so two test packages running side by side never get
// the same port between the check and their server's bind (CI's `go test
// ./...` runs packages in parallel, each starting its own servers). It
// draws at random from 20000-31999, below the kernel's ephemeral range
// (32768 and up by default, /proc/sys/net/ipv4/ip_local_port_range): a
// port the kernel handed out (a ":0" listener, the source port of any
// outgoing connection) can be taken again by the next outgoing connection
// before the server binds it — seen as "bind: address already in use" when
// two e2e packages ran side by side. kwokctl takes its clusters' ports
// counting down from 32767, above this range.
func FreePort() (int, error) {
	hi := 32000
	if lo := ephemeralLow(); lo > 0 && lo < hi {
		hi = lo
	}
	if hi > freePortLow+1000 {
		for range 400 {
			port := freePortLow + rand.IntN(hi-freePortLow)
			if !portFree(port) {
				continue
			}
			reserved, err := reservePort(port)
			if err != nil {
				return 0, err
			}
			if reserved && portFree(port) {
				return port, nil
			}
		}
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// PortLockDir is where FreePort's reservations live: one file per port,
// locked (flock) by the process that was handed the port. It is the one
// name the test servers share on purpose, so that they never share a port.
func PortLockDir() string {
	return filepath.Join(os.TempDir(), fmt.Sprintf("cairn-test-ports-%d", os.Getuid()))
}

var (
	portLocksMu sync.Mutex
	portLocks   = map[int]*os.File{} // held until the process exits
)

// reservePort takes port's lock without waiting: false when another
// process (or an earlier FreePort of this one) holds it. The lock is
// released when the process exits, however it exits.
func reservePort(port int) (bool, error) {
	portLocksMu.Lock()
	defer portLocksMu.Unlock()
	if _, held := portLocks[port]; held {
		return false, nil
	}
	dir := PortLockDir()
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return false, fmt.Errorf("port reservations: %w", err)
	}
	f, err := os.OpenFile(filepath.Join(dir, strconv.Itoa(port)), os.O_CREATE|os.O_RDWR, 0o600)
	if err != nil {
		return false, fmt.Errorf("port reservations: %w", err)
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		f.Close()
		if errors.Is(err, syscall.EWOULDBLOCK) {
			return false, nil
		}
		return false, fmt.Errorf("port reservations: lock %s: %w", f.Name(), err)
	}
	portLocks[port] = f
	return true, nil
}

const freePortLow = 20000

// ephemeralLow is the first port of the kernel's ephemeral range (0 when
// it cannot be read).
func ephemeralLow() int {
	b, err := os.ReadFile("/proc/sys/net/ipv4/ip_local_port_range")
	if err != nil {
		return 0
	}
	var lo, hi int
	if _, err := fmt.Sscan(string(b), &lo, &hi); err != nil {
		return 0
	}
	return lo
}

func portFree(port int) bool {
	for _, host := range []string{"127.0.0.1", ""} {
		l, err := net.Listen("tcp", net.JoinHostPort(host, strconv.Itoa(port)))
		if err != nil {
			return false
		}
		l.Close()
	}
	return true
}

// Poll calls fn until it returns nil or the deadline passes; then it
// returns fn's last error. It never sleeps longer than interval at a time.
func Poll(timeout, interval time.Duration, fn func() error) error {
	deadline := time.Now().Add(timeout)
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		err := fn()
		if err == nil {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("gave up after %s: %w", timeout, err)
		}
		<-t.C
	}
}

// ownTmp is the environment of a server or tool started for a test: this
// process's, with TMPDIR set to the server's own folder, so that nothing it
// writes lands under a name in the shared /tmp.
func ownTmp(dir string) []string {
	env := make([]string, 0, len(os.Environ())+1)
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "TMPDIR=") {
			env = append(env, kv)
		}
	}
	return append(env, "TMPDIR="+dir)
}

// server is a long-running child process.
type server struct {
	name   string
	cmd    *exec.Cmd
	logf   string
	exited chan struct{}
	err    error
}

// startServer starts a server process that dies with the test process.
func startServer(name, logFile string, cmd *exec.Cmd) (*server, error) {
	lf, err := os.OpenFile(logFile, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return nil, err
	}
	cmd.Stdout, cmd.Stderr = lf, lf
	if cmd.SysProcAttr == nil {
		cmd.SysProcAttr = &syscall.SysProcAttr{}
	}
	// If the test binary dies (a panic, a timeout), the server dies too.
	cmd.SysProcAttr.Pdeathsig = syscall.SIGKILL
	if err := cmd.Start(); err != nil {
		lf.Close()
		return nil, fmt.Errorf("start %s: %w", name, err)
	}
	s := &server{name: name, cmd: cmd, logf: logFile, exited: make(chan struct{})}
	go func() {
		s.err = cmd.Wait()
		lf.Close()
		close(s.exited)
	}()
	return s, nil
}

func (s *server) running() error {
	select {
	case <-s.exited:
		return fmt.Errorf("%s exited (%v); log:\n%s", s.name, s.err, tailFile(s.logf, 2000))
	default:
		return nil
	}
}

// stop sends sig, waits up to grace, then kills.
func (s *server) stop(sig os.Signal, grace time.Duration) {
	if s == nil {
		return
	}
	select {
	case <-s.exited:
		return
	default:
	}
	_ = s.cmd.Process.Signal(sig)
	select {
	case <-s.exited:
	case <-time.After(grace):
		_ = s.cmd.Process.Kill()
		<-s.exited
	}
}

func tailFile(name string, n int) string {
	b, err := os.ReadFile(name)
	if err != nil {
		return "(" + err.Error() + ")"
	}
	if len(b) > n {
		b = b[len(b)-n:]
	}
	return string(b)
}

// runQuiet runs a command and returns its combined output in the error.
func runQuiet(ctx context.Context, cmd *exec.Cmd) error {
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("%s: %w: %s", strings.Join(cmd.Args, " "), err, strings.TrimSpace(out.String()))
	}
	return nil
}

// BuildAgent builds the agent binary into dir and returns its path.
func BuildAgent(dir string) (string, error) {
	root, err := RepoRoot()
	if err != nil {
		return "", err
	}
	goBin := filepath.Join(runtime.GOROOT(), "bin", "go")
	if _, err := os.Stat(goBin); err != nil {
		if goBin, err = exec.LookPath("go"); err != nil {
			return "", errors.New("go not found to build the agent")
		}
	}
	out := filepath.Join(dir, "agent")
	// CGO off and -trimpath as `make build-agent` and `make images`: their
	// compiled packages in the build cache serve this build too.
	cmd := exec.Command(goBin, "build", "-trimpath", "-o", out, "-ldflags", "-X main.version=test", ".")
	cmd.Dir = filepath.Join(root, "agent")
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	if err := runQuiet(context.Background(), cmd); err != nil {
		return "", fmt.Errorf("build agent: %w", err)
	}
	return out, nil
}
