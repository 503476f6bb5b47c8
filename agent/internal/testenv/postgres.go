package testenv

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// PGBinDir is where Debian's postgresql-15 package puts the server.
const PGBinDir = "/usr/lib/postgresql/15/bin"

// Postgres is a private PostgreSQL 15 server run as the postgres OS user
// (PostgreSQL refuses to run as root).
type Postgres struct {
	Dir      string
	Port     int
	User     string // superuser, password-authenticated over TCP
	Password string
	BinDir   string
	srv      *server
}

// StartPostgres initialises a cluster in a new temporary folder and starts
// it on a free port of 127.0.0.1.
func StartPostgres(password string) (*Postgres, error) {
	for _, b := range []string{"initdb", "postgres", "psql", "pg_dump", "pg_restore"} {
		if _, err := os.Stat(filepath.Join(PGBinDir, b)); err != nil {
			return nil, fmt.Errorf("PostgreSQL 15 %s not found in %s: %s", b, PGBinDir, Hint)
		}
	}
	if _, err := exec.LookPath("runuser"); err != nil {
		return nil, fmt.Errorf("runuser not found: %s", Hint)
	}
	u, err := user.Lookup("postgres")
	if err != nil {
		return nil, fmt.Errorf("no postgres OS user: %s", Hint)
	}
	uid, _ := strconv.Atoi(u.Uid)
	gid, _ := strconv.Atoi(u.Gid)

	dir, err := os.MkdirTemp("", "cairn-pg-")
	if err != nil {
		return nil, err
	}
	p := &Postgres{Dir: dir, User: "postgres", Password: password, BinDir: PGBinDir}
	ok := false
	defer func() {
		if !ok {
			p.Stop()
		}
	}()
	// The server runs as postgres: it must own its folder.
	if err := os.Chown(dir, uid, gid); err != nil {
		return nil, err
	}
	if err := os.Chmod(dir, 0o700); err != nil {
		return nil, err
	}
	pwfile := filepath.Join(dir, "pwfile")
	if err := os.WriteFile(pwfile, []byte(password+"\n"), 0o600); err != nil {
		return nil, err
	}
	if err := os.Chown(pwfile, uid, gid); err != nil {
		return nil, err
	}
	data := filepath.Join(dir, "data")
	initdb := exec.Command("runuser", "-u", "postgres", "--", filepath.Join(PGBinDir, "initdb"),
		"-D", data, "-U", "postgres", "--pwfile="+pwfile, "--auth-host=scram-sha-256", "--auth-local=trust",
		"-E", "UTF8", "--locale=C.UTF-8", "--no-sync")
	initdb.Env = ownTmp(dir)
	if err := runQuiet(context.Background(), initdb); err != nil {
		return nil, err
	}
	os.Remove(pwfile)

	var lastErr error
	for attempt := 0; attempt < 3; attempt++ {
		port, err := FreePort()
		if err != nil {
			return nil, err
		}
		cmd := exec.Command(filepath.Join(PGBinDir, "postgres"), "-D", data, "-p", strconv.Itoa(port),
			"-c", "listen_addresses=127.0.0.1",
			"-c", "unix_socket_directories="+dir,
			"-c", "fsync=off", "-c", "synchronous_commit=off", "-c", "full_page_writes=off",
			"-c", "shared_buffers=128MB", "-c", "max_connections=40",
			"-c", "max_wal_size=2GB", "-c", "logging_collector=off",
			// Logical replication (a migration's Continuous mode).
			"-c", "wal_level=logical", "-c", "max_replication_slots=10", "-c", "max_wal_senders=10")
		cmd.Dir = dir
		// Same as runuser -u postgres, with the parent-death signal kept.
		cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid)}}
		cmd.Env = []string{"PATH=" + PGBinDir + ":/usr/bin:/bin", "LANG=C.UTF-8", "TMPDIR=" + dir}
		srv, err := startServer("postgres", filepath.Join(dir, "server.log"), cmd)
		if err != nil {
			return nil, err
		}
		p.srv, p.Port = srv, port
		lastErr = Poll(60*time.Second, 100*time.Millisecond, func() error {
			if err := srv.running(); err != nil {
				return nil // stop polling: reported below
			}
			_, err := p.SQL("postgres", "SELECT 1")
			return err
		})
		if lastErr == nil {
			if lastErr = srv.running(); lastErr == nil {
				ok = true
				return p, nil
			}
		}
		srv.stop(syscall.SIGQUIT, 10*time.Second)
	}
	return nil, fmt.Errorf("postgres did not start: %w", lastErr)
}

// Stop shuts the server down and removes its folder.
func (p *Postgres) Stop() {
	if p == nil {
		return
	}
	p.srv.stop(syscall.SIGINT, 30*time.Second) // fast shutdown
	if p.Dir != "" {
		os.RemoveAll(p.Dir)
	}
}

// Env returns the environment for running PostgreSQL client tools
// against this server (the password in PGPASSWORD).
func (p *Postgres) Env() []string {
	return []string{"PATH=" + p.BinDir + ":" + os.Getenv("PATH"), "PGPASSWORD=" + p.Password, "PGHOST=127.0.0.1",
		"PGPORT=" + strconv.Itoa(p.Port), "PGUSER=" + p.User, "LANG=C.UTF-8", "PGTZ=UTC"}
}

// SQL runs sql in database db through psql and returns its unaligned,
// tuples-only output.
func (p *Postgres) SQL(db, sql string) (string, error) {
	return p.SQLContext(context.Background(), db, sql)
}

// SQLContext is SQL with a context.
func (p *Postgres) SQLContext(ctx context.Context, db, sql string) (string, error) {
	// The database name as a quoted conninfo value: a bare -d value with
	// "=" or a URI prefix would be read as a connection string.
	conninfo := "dbname='" + strings.NewReplacer(`\`, `\\`, `'`, `\'`).Replace(db) + "'"
	cmd := exec.CommandContext(ctx, filepath.Join(p.BinDir, "psql"), "-X", "-q", "-A", "-t", "-v", "ON_ERROR_STOP=1", "--dbname="+conninfo)
	cmd.Env = p.Env()
	cmd.Stdin = strings.NewReader(sql)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	if err := cmd.Run(); err != nil {
		return "", fmt.Errorf("psql: %w: %s", err, strings.TrimSpace(errb.String()))
	}
	return strings.TrimSpace(out.String()), nil
}
