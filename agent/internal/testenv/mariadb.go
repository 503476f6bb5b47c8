package testenv

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// MariaDB is a private MariaDB server. Tests reach it as root over its unix
// socket; the agent over TCP on 127.0.0.1 as User with Password.
type MariaDB struct {
	Dir      string
	Port     int
	Socket   string
	User     string
	Password string
	srv      *server
}

// StartMariaDB initialises a data folder in a new temporary folder and
// starts mariadbd on a free port of 127.0.0.1, then creates User. The
// server writes no binary log.
func StartMariaDB(user, password string) (*MariaDB, error) {
	return startMariaDB(user, password, "--skip-log-bin")
}

// StartMariaDBWithBinlog is StartMariaDB with the binary log on, in ROW
// format, as a source a point-in-time archiver reads (server id 1, files
// mysql-bin.NNNNNN).
func StartMariaDBWithBinlog(user, password string) (*MariaDB, error) {
	// Functions that write may be created without SUPER (as tests that
	// prove a check cannot write do) — what a binary log otherwise refuses.
	return startMariaDB(user, password, "--log-bin=mysql-bin", "--binlog-format=ROW", "--server-id=1",
		"--log-bin-trust-function-creators=1")
}

func startMariaDB(user, password string, binlog ...string) (*MariaDB, error) {
	mariadbd, err := lookBinary("mariadbd", "/usr/sbin/mariadbd")
	if err != nil {
		return nil, err
	}
	installDB, err := lookBinary("mariadb-install-db", "/usr/bin/mariadb-install-db")
	if err != nil {
		return nil, err
	}
	for _, b := range []string{"mysql", "mysqldump"} {
		if _, err := exec.LookPath(b); err != nil {
			return nil, fmt.Errorf("%s not found: %s", b, Hint)
		}
	}
	dir, err := os.MkdirTemp("", "cairn-mariadb-")
	if err != nil {
		return nil, err
	}
	m := &MariaDB{Dir: dir, Socket: filepath.Join(dir, "mysqld.sock"), User: user, Password: password}
	ok := false
	defer func() {
		if !ok {
			m.Stop()
		}
	}()
	data := filepath.Join(dir, "data")
	if err := bootstrapMariaDB(installDB, dir, data); err != nil {
		return nil, err
	}
	var lastErr error
	for attempt := 0; attempt < 3; attempt++ {
		port, err := FreePort()
		if err != nil {
			return nil, err
		}
		args := append([]string{"--no-defaults", "--datadir=" + data, "--user=root",
			"--port=" + strconv.Itoa(port), "--bind-address=127.0.0.1", "--socket=" + m.Socket,
			"--pid-file=" + filepath.Join(dir, "mysqld.pid"), "--tmpdir=" + dir,
			"--skip-name-resolve", "--innodb-buffer-pool-size=128M",
			"--innodb-flush-log-at-trx-commit=0", "--max-allowed-packet=256M",
			"--character-set-server=utf8mb4", "--collation-server=utf8mb4_unicode_ci"}, binlog...)
		cmd := exec.Command(mariadbd, args...)
		cmd.Env = ownTmp(dir)
		srv, err := startServer("mariadbd", filepath.Join(dir, "server.log"), cmd)
		if err != nil {
			return nil, err
		}
		m.srv, m.Port = srv, port
		lastErr = Poll(60*time.Second, 100*time.Millisecond, func() error {
			if err := srv.running(); err != nil {
				return nil
			}
			_, err := m.SQL("", "SELECT 1")
			return err
		})
		if lastErr == nil {
			if lastErr = srv.running(); lastErr == nil {
				break
			}
		}
		srv.stop(syscall.SIGKILL, 10*time.Second)
	}
	if lastErr != nil {
		return nil, fmt.Errorf("mariadbd did not start: %w", lastErr)
	}
	q := fmt.Sprintf("CREATE USER '%s'@'127.0.0.1' IDENTIFIED BY '%s'; GRANT ALL PRIVILEGES ON *.* TO '%s'@'127.0.0.1' WITH GRANT OPTION;",
		user, strings.ReplaceAll(password, "'", "''"), user)
	if _, err := m.SQL("", q); err != nil {
		return nil, err
	}
	ok = true
	return m, nil
}

// Stop shuts the server down and removes its folder.
func (m *MariaDB) Stop() {
	if m == nil {
		return
	}
	m.srv.stop(syscall.SIGTERM, 60*time.Second)
	if m.Dir != "" {
		os.RemoveAll(m.Dir)
	}
}

// SQL runs sql as root over the socket, in database db (may be empty), and
// returns tab-separated rows without headers.
func (m *MariaDB) SQL(db, sql string) (string, error) {
	args := []string{"--no-defaults", "--socket=" + m.Socket, "--user=root", "--default-character-set=utf8mb4",
		"--batch", "--skip-column-names", "--raw"}
	if db != "" {
		args = append(args, "--database="+db)
	}
	cmd := exec.Command("mysql", args...)
	cmd.Stdin = strings.NewReader(sql)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	if err := cmd.Run(); err != nil {
		return "", fmt.Errorf("mysql: %w: %s", err, strings.TrimSpace(errb.String()))
	}
	return strings.TrimSpace(out.String()), nil
}

// bootstrapMariaDB creates the system tables in data with dir as the
// bootstrap server's temporary folder. Without --tmpdir the bootstrap
// keeps its temporary tables in the shared /tmp, and every mariadbd that
// starts (another package's bootstrap among them) deletes the #sql* files
// it finds in its tmpdir: two bootstraps side by side failed with
// "Unknown table 'mysql.tmp_proxies_priv'" (issue 52;
// TestConcurrentMariaDBBootstraps).
func bootstrapMariaDB(installDB, dir, data string) error {
	install := exec.Command(installDB, "--no-defaults", "--datadir="+data, "--user=root",
		"--auth-root-authentication-method=normal", "--skip-test-db", "--skip-name-resolve",
		"--tmpdir="+dir)
	install.Env = ownTmp(dir)
	return runQuiet(context.Background(), install)
}
