package testenv

import (
	"fmt"
	"strconv"
	"strings"
	"time"
)

// PostgresContainer is a PostgreSQL server of the matrix in a container.
// The embedded *Postgres has its Port, User ("postgres") and Password, as
// the host's server does; SQL runs psql inside the container (over its
// socket, as postgres), so the host needs no client of that major.
type PostgresContainer struct {
	*Postgres
	Matrix    MatrixServer
	Container *Container
}

// pgStart initialises a cluster in the container and runs the server as
// postgres (setpriv: the server is the container's main process). The
// settings are the host server's (StartPostgres).
const pgStart = `set -eu
bin=/usr/lib/postgresql/$PGMAJOR/bin
mkdir -p /var/lib/cairn && chown postgres:postgres /var/lib/cairn
printf '%s\n' "$PGPW" > /var/lib/cairn/pw && chown postgres /var/lib/cairn/pw
setpriv --reuid=postgres --regid=postgres --init-groups "$bin/initdb" -D /var/lib/cairn/data -U postgres \
  --pwfile=/var/lib/cairn/pw --auth-host=scram-sha-256 --auth-local=trust -E UTF8 --locale=C.UTF-8 --no-sync >/dev/null
rm -f /var/lib/cairn/pw
exec setpriv --reuid=postgres --regid=postgres --init-groups "$bin/postgres" -D /var/lib/cairn/data -p "$PGPORT" \
  -c listen_addresses=127.0.0.1 -c unix_socket_directories=/tmp \
  -c fsync=off -c synchronous_commit=off -c full_page_writes=off \
  -c shared_buffers=128MB -c max_connections=40 -c max_wal_size=2GB -c logging_collector=off \
  -c wal_level=logical -c max_replication_slots=10 -c max_wal_senders=10
`

// StartPostgresContainer starts s's image on a free port of 127.0.0.1;
// the superuser postgres has password.
func StartPostgresContainer(s MatrixServer, password string) (*PostgresContainer, error) {
	var lastErr error
	for attempt := 0; attempt < 3; attempt++ {
		port, err := FreePort()
		if err != nil {
			return nil, err
		}
		c, err := StartContainer(s.Image, s.Name, []string{"PGMAJOR=" + s.Major, "PGPORT=" + strconv.Itoa(port), "PGPW=" + password},
			"bash", "-c", pgStart)
		if err != nil {
			return nil, err
		}
		p := &PostgresContainer{Postgres: &Postgres{Port: port, User: "postgres", Password: password, BinDir: PGBinDir},
			Matrix: s, Container: c}
		lastErr = c.waitReady(2*time.Minute, func() error { _, err := p.SQL("", "SELECT 1"); return err })
		if lastErr == nil {
			return p, nil
		}
		c.Remove()
		if !strings.Contains(lastErr.Error(), "already in use") {
			break
		}
	}
	return nil, fmt.Errorf("PostgreSQL %s did not start: %w", s.Major, lastErr)
}

func (p *PostgresContainer) Server() MatrixServer { return p.Matrix }
func (p *PostgresContainer) Port() int            { return p.Postgres.Port }

// SQL runs sql in database db (empty: postgres) with the container's psql
// and returns its unaligned, tuples-only output.
func (p *PostgresContainer) SQL(db, sql string) (string, error) {
	if db == "" {
		db = "postgres"
	}
	ctx, cancel := execCtx()
	defer cancel()
	conninfo := "dbname='" + strings.NewReplacer(`\`, `\\`, `'`, `\'`).Replace(db) + "'"
	out, err := p.Container.Exec(ctx, sql, "setpriv", "--reuid=postgres", "--regid=postgres", "--init-groups",
		"/usr/lib/postgresql/"+p.Matrix.Major+"/bin/psql", "-X", "-q", "-A", "-t", "-v", "ON_ERROR_STOP=1",
		"-h", "/tmp", "-p", strconv.Itoa(p.Postgres.Port), "-U", "postgres", "--dbname="+conninfo)
	if err != nil {
		return "", fmt.Errorf("psql (PostgreSQL %s): %w", p.Matrix.Major, err)
	}
	return strings.TrimSpace(out), nil
}

func (p *PostgresContainer) Version() (string, error) { return p.SQL("", "SHOW server_version") }

func (p *PostgresContainer) AgentEnv(db string) []string {
	return pgAgentEnv(p.Postgres.Port, p.User, p.Password, db)
}

// Stop removes the container (and the data in it).
func (p *PostgresContainer) Stop() {
	if p != nil {
		p.Container.Remove()
	}
}

// MySQLContainer is a MySQL or MariaDB server of the matrix in a
// container: root over its socket inside the container (SQL), User with
// Password over TCP on 127.0.0.1:Port for the agent.
type MySQLContainer struct {
	*MariaDB
	Matrix    MatrixServer
	Container *Container
	client    string
}

// myStart initialises a data folder and runs the server as the
// container's main process. MySQL: the binary log and GTIDs on
// (gtid_mode=ON, as MySQL replication sources run), the X plugin off (its
// port would clash on the host network), users authenticated by MySQL's
// default caching_sha2_password. MariaDB: the binary log only when
// $BINLOG is set (ROW format, as StartMariaDBWithBinlog).
const myStart = `set -eu
data=/var/lib/cairn/data; mkdir -p /var/lib/cairn
common="--no-defaults --datadir=$data --user=root --port=$MYPORT --bind-address=127.0.0.1 --socket=/tmp/mysqld.sock
  --pid-file=/var/lib/cairn/mysqld.pid --skip-name-resolve --innodb-buffer-pool-size=128M
  --innodb-flush-log-at-trx-commit=0 --max-allowed-packet=256M --character-set-server=utf8mb4"
if [ "$FLAVOR" = mysql ]; then
  mysqld --no-defaults --initialize-insecure --datadir=$data --user=root >/dev/null 2>&1
  exec mysqld $common --mysqlx=OFF --secure-file-priv=/tmp --server-id=1 --log-bin=mysql-bin \
    --gtid-mode=ON --enforce-gtid-consistency=ON --log-error-verbosity=2
fi
mariadb-install-db --no-defaults --datadir=$data --user=root --auth-root-authentication-method=normal \
  --skip-test-db --skip-name-resolve >/dev/null
binlog=--skip-log-bin
[ -n "${BINLOG:-}" ] && binlog="--log-bin=mysql-bin --binlog-format=ROW --server-id=1 --log-bin-trust-function-creators=1"
exec mariadbd $common --collation-server=utf8mb4_unicode_ci $binlog
`

// StartMySQLContainer starts s's image (MySQL or MariaDB) on a free port
// of 127.0.0.1 and creates user (all privileges, with grant option) with
// password, authenticated by the server's default plugin.
func StartMySQLContainer(s MatrixServer, user, password string, binlog bool) (*MySQLContainer, error) {
	env := []string{"FLAVOR=" + s.Engine}
	if binlog {
		env = append(env, "BINLOG=1")
	}
	client := "mariadb"
	if s.Engine == "mysql" {
		client = "mysql"
	}
	var lastErr error
	for attempt := 0; attempt < 3; attempt++ {
		port, err := FreePort()
		if err != nil {
			return nil, err
		}
		c, err := StartContainer(s.Image, s.Name, append(env, "MYPORT="+strconv.Itoa(port)), "bash", "-c", myStart)
		if err != nil {
			return nil, err
		}
		m := &MySQLContainer{MariaDB: &MariaDB{Port: port, User: user, Password: password}, Matrix: s, Container: c, client: client}
		lastErr = c.waitReady(3*time.Minute, func() error { _, err := m.SQL("", "SELECT 1"); return err })
		if lastErr == nil {
			q := fmt.Sprintf("CREATE USER '%s'@'127.0.0.1' IDENTIFIED BY '%s'; GRANT ALL PRIVILEGES ON *.* TO '%s'@'127.0.0.1' WITH GRANT OPTION;",
				user, strings.ReplaceAll(password, "'", "''"), user)
			if _, err := m.SQL("", q); err != nil {
				c.Remove()
				return nil, err
			}
			return m, nil
		}
		c.Remove()
		if !strings.Contains(lastErr.Error(), "already in use") {
			break
		}
	}
	return nil, fmt.Errorf("%s %s did not start: %w", s.Engine, s.Major, lastErr)
}

func (m *MySQLContainer) Server() MatrixServer { return m.Matrix }
func (m *MySQLContainer) Port() int            { return m.MariaDB.Port }

// SQL runs sql as root over the container's socket, in database db (may
// be empty), and returns tab-separated rows without headers.
func (m *MySQLContainer) SQL(db, sql string) (string, error) {
	args := []string{m.client, "--no-defaults", "--socket=/tmp/mysqld.sock", "--user=root",
		"--default-character-set=utf8mb4", "--batch", "--skip-column-names", "--raw"}
	if db != "" {
		args = append(args, "--database="+db)
	}
	ctx, cancel := execCtx()
	defer cancel()
	out, err := m.Container.Exec(ctx, sql, args...)
	if err != nil {
		return "", fmt.Errorf("%s (%s %s): %w", m.client, m.Matrix.Engine, m.Matrix.Major, err)
	}
	return strings.TrimSpace(out), nil
}

func (m *MySQLContainer) Version() (string, error) { return m.SQL("", "SELECT VERSION()") }

func (m *MySQLContainer) AgentEnv(db string) []string {
	return myAgentEnv(m.MariaDB.Port, m.User, m.Password, db)
}

// Stop removes the container (and the data in it).
func (m *MySQLContainer) Stop() {
	if m != nil {
		m.Container.Remove()
	}
}
