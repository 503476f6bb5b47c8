package pitr_test

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"cairn.dev/agent/internal/engine"
	"cairn.dev/agent/internal/testenv"
)

// pgServer is a private PostgreSQL server of testenv's build, started
// with settings of the test's own (a source with prepared transactions,
// logical replication): testenv.StartPostgres takes none.
type pgServer struct {
	dir, password string
	port          int
	cmd           *exec.Cmd
	exited        chan struct{}
}

func startPG(t *testing.T, settings ...string) *pgServer {
	t.Helper()
	u, err := user.Lookup("postgres")
	if err != nil {
		t.Fatalf("no postgres OS user: %s", testenv.Hint)
	}
	uid, _ := strconv.Atoi(u.Uid)
	gid, _ := strconv.Atoi(u.Gid)
	dir, err := os.MkdirTemp("", "cairn-pitr-pg-")
	if err != nil {
		t.Fatal(err)
	}
	p := &pgServer{dir: dir, password: "pitr s3cret"}
	t.Cleanup(p.stop)
	check(t, os.Chown(dir, uid, gid))
	pwfile := filepath.Join(dir, "pwfile")
	check(t, os.WriteFile(pwfile, []byte(p.password+"\n"), 0o600))
	check(t, os.Chown(pwfile, uid, gid))
	cred := &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid)}}
	initdb := exec.Command(filepath.Join(testenv.PGBinDir, "initdb"), "-D", filepath.Join(dir, "data"), "-U", "postgres",
		"--pwfile="+pwfile, "--auth-host=scram-sha-256", "--auth-local=trust", "-E", "UTF8", "--locale=C.UTF-8", "--no-sync")
	initdb.SysProcAttr, initdb.Env, initdb.Dir = cred, []string{"PATH=/usr/bin:/bin", "LANG=C.UTF-8", "TMPDIR=" + dir}, dir
	if out, err := initdb.CombinedOutput(); err != nil {
		t.Fatalf("initdb: %v: %s", err, out)
	}
	if p.port, err = testenv.FreePort(); err != nil {
		t.Fatal(err)
	}
	args := []string{"-D", filepath.Join(dir, "data"), "-p", strconv.Itoa(p.port), "-c", "listen_addresses=127.0.0.1",
		"-c", "unix_socket_directories=" + dir, "-c", "fsync=off", "-c", "logging_collector=off", "-c", "shared_buffers=32MB"}
	for _, s := range settings {
		args = append(args, "-c", s)
	}
	p.cmd = exec.Command(filepath.Join(testenv.PGBinDir, "postgres"), args...)
	p.cmd.SysProcAttr = &syscall.SysProcAttr{Credential: cred.Credential, Pdeathsig: syscall.SIGKILL}
	p.cmd.Env, p.cmd.Dir = []string{"PATH=/usr/bin:/bin", "LANG=C.UTF-8", "TMPDIR=" + dir}, dir
	logf, err := os.Create(filepath.Join(dir, "server.log"))
	check(t, err)
	p.cmd.Stdout, p.cmd.Stderr = logf, logf
	check(t, p.cmd.Start())
	p.exited = make(chan struct{})
	go func() { p.cmd.Wait(); logf.Close(); close(p.exited) }()
	if err := testenv.Poll(60*time.Second, 100*time.Millisecond, func() error {
		select {
		case <-p.exited:
			b, _ := os.ReadFile(filepath.Join(dir, "server.log"))
			t.Fatalf("postgres exited: %s", b)
		default:
		}
		_, err := p.sql("postgres", "SELECT 1")
		return err
	}); err != nil {
		t.Fatal(err)
	}
	return p
}

func (p *pgServer) conn() engine.Conn {
	return engine.Conn{Host: "127.0.0.1", Port: p.port, User: "postgres", Password: p.password}
}

func (p *pgServer) sql(db, q string) (string, error) {
	cmd := exec.Command(filepath.Join(testenv.PGBinDir, "psql"), "-X", "-q", "-A", "-t", "-v", "ON_ERROR_STOP=1", "--dbname="+db)
	cmd.Env = []string{"PGHOST=127.0.0.1", "PGPORT=" + strconv.Itoa(p.port), "PGUSER=postgres", "PGPASSWORD=" + p.password, "LANG=C.UTF-8"}
	cmd.Stdin = strings.NewReader(q)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	if err := cmd.Run(); err != nil {
		return "", fmt.Errorf("psql %s: %w: %s", q, err, strings.TrimSpace(errb.String()))
	}
	return strings.TrimSpace(out.String()), nil
}

func (p *pgServer) must(t *testing.T, db, q string) string {
	t.Helper()
	out, err := p.sql(db, q)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func (p *pgServer) stop() {
	if p.cmd != nil && p.cmd.Process != nil {
		p.cmd.Process.Signal(syscall.SIGINT)
		select {
		case <-p.exited:
		case <-time.After(30 * time.Second):
			p.cmd.Process.Kill()
			<-p.exited
		}
	}
	os.RemoveAll(p.dir)
}

func check(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}
