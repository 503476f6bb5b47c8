package harden_test

import (
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"cairn.dev/agent/internal/harden"
	"cairn.dev/agent/internal/testenv"
)

const secret = "cairn-harden-SECRET-7d1e"

// TestMain: run with CAIRN_HARDEN_HELPER=<mode>, the test binary is a
// stand-in for the agent: it holds the secret in its environment, applies
// mode (seal, unsetenv, none), then runs a child of its own user that
// reads /proc/<its pid>/environ, as a program started by a restore's
// temporary server could; it prints what the child read.
func TestMain(m *testing.M) {
	if mode := os.Getenv("CAIRN_HARDEN_HELPER"); mode != "" {
		switch mode {
		case "seal":
			if err := harden.Seal(); err != nil {
				fmt.Println("seal:", err)
				os.Exit(2)
			}
		case "unsetenv":
			os.Unsetenv("CAIRN_DB_PASSWORD")
		}
		cat := exec.Command("cat", fmt.Sprintf("/proc/%d/environ", os.Getpid()))
		cat.Env = []string{"PATH=/usr/bin:/bin"}
		out, err := cat.CombinedOutput()
		fmt.Printf("read=%v secret=%v\n", err == nil, strings.Contains(string(out), secret))
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// helper runs the stand-in agent in mode, as nobody when the test runs as
// root (root's CAP_SYS_PTRACE reads any process: the agent's pod runs as a
// non-root user without it).
func helper(t *testing.T, mode string) string {
	t.Helper()
	bin := os.Args[0]
	if os.Geteuid() == 0 {
		// A copy nobody may run (the build folder is root's own).
		dir, err := os.MkdirTemp("", "cairn-harden-")
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { os.RemoveAll(dir) })
		b, err := os.ReadFile(bin)
		if err != nil {
			t.Fatal(err)
		}
		bin = filepath.Join(dir, "agent")
		if err := os.WriteFile(bin, b, 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.Chmod(dir, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	cmd := exec.Command(bin, "-test.run=^$")
	cmd.Env = []string{"CAIRN_HARDEN_HELPER=" + mode, "CAIRN_DB_PASSWORD=" + secret, "PATH=/usr/bin:/bin"}
	if os.Geteuid() == 0 {
		cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: 65534, Gid: 65534}}
	}
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("helper %s: %v: %s", mode, err, out)
	}
	return strings.TrimSpace(string(out))
}

func TestSealedEnvironIsNotReadable(t *testing.T) {
	if got := helper(t, "none"); got != "read=true secret=true" {
		t.Fatalf("an unsealed process's environ, read by a child of its user: %s, want the secret read (the test would prove nothing)", got)
	}
	if got := helper(t, "seal"); got != "read=false secret=false" {
		t.Errorf("a sealed process's environ, read by a child of its user: %s, want it refused", got)
	}
}

func TestUnsetenvLeavesProcEnviron(t *testing.T) {
	if got := helper(t, "unsetenv"); got != "read=true secret=true" {
		t.Errorf("after os.Unsetenv, /proc/<pid>/environ read by a child: %s; the package documentation says it still holds the secret", got)
	}
}

// The agent binary seals itself first thing: run as the test's
// unprivileged user, blocked in wal-fetch on a socket that never answers,
// its environ is refused to a process of the same user.
func TestAgentIsSealed(t *testing.T) {
	dir, err := os.MkdirTemp("", "cairn-harden-agent-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	if err := os.Chmod(dir, 0o777); err != nil {
		t.Fatal(err)
	}
	bin, err := testenv.BuildAgent(dir)
	if err != nil {
		t.Fatal(err)
	}
	sock := filepath.Join(dir, "s")
	ln, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	if err := os.Chmod(sock, 0o777); err != nil {
		t.Fatal(err)
	}
	var cred *syscall.SysProcAttr
	if os.Geteuid() == 0 {
		cred = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: 65534, Gid: 65534}}
	}
	agent := exec.Command(bin, "wal-fetch", sock, "000000010000000000000001", filepath.Join(dir, "x"))
	agent.Env = []string{"CAIRN_DB_PASSWORD=" + secret, "PATH=/usr/bin:/bin"}
	agent.SysProcAttr = cred
	if err := agent.Start(); err != nil {
		t.Fatal(err)
	}
	c, err := ln.Accept() // the agent is running and waits for its answer
	if err != nil {
		t.Fatal(err)
	}
	cat := exec.Command("cat", fmt.Sprintf("/proc/%d/environ", agent.Process.Pid))
	cat.Env, cat.SysProcAttr = []string{"PATH=/usr/bin:/bin"}, cred
	out, readErr := cat.CombinedOutput()
	c.Close()
	agent.Wait()
	if readErr == nil || strings.Contains(string(out), secret) {
		t.Errorf("a process of the agent's user read its environ (err %v, secret there: %v)", readErr, strings.Contains(string(out), secret))
	}
}
