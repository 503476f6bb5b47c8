package testenv

import (
	"context"
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"
)

// The version matrix: every database server Cairn supports that this
// machine can run (docs/compatibility.md). PostgreSQL 15 and MariaDB 10.11
// are the host's own servers (hack/agent-deps.sh); the others are
// containers of images built by `make db-images`. Agent is the agent
// image whose tools serve that server (the per-major agent images of
// hack/images/agents.sh, `make agent-images`). MariaDB 11.8 is served by
// the bookworm image's MariaDB 10.11 client (any MariaDB client serves
// any MariaDB server), so the ci matrix needs no trixie agent image;
// TestRoundTripOtherImages runs it with trixie's 11.8 client too.
type MatrixServer struct {
	// Name is the server's short name: pg13, pg15, pg17, pg18,
	// mariadb10.11, mariadb11.8, mysql9.7.
	Name string
	// Engine is postgres, mariadb or mysql (the agent's CAIRN_ENGINE is
	// "mysql" for both of the last two).
	Engine string
	// Major: PostgreSQL's major (13), MySQL's and MariaDB's series
	// ("9.7", "11.8").
	Major string
	// Image is the server's image; empty: the host's server.
	Image string
	// Agent is the agent image carrying tools for this server.
	Agent string
	// PITRAgent is the agent image carrying the PostgreSQL server of
	// exactly this major (a point-in-time replay); PostgreSQL only.
	PITRAgent string
}

// PGMajor is Major as a number (PostgreSQL).
func (s MatrixServer) PGMajor() int { n, _ := strconv.Atoi(s.Major); return n }

// AgentEngine is the agent's CAIRN_ENGINE for the server.
func (s MatrixServer) AgentEngine() string {
	if s.Engine == "postgres" {
		return "postgres"
	}
	return "mysql"
}

// Matrix is every server, oldest first per engine.
var Matrix = []MatrixServer{
	{Name: "pg13", Engine: "postgres", Major: "13", Image: "cairn.local/postgres:13", Agent: "cairn.local/agent:dev", PITRAgent: "cairn.local/agent:dev-pg13"},
	{Name: "pg15", Engine: "postgres", Major: "15", Agent: "cairn.local/agent:dev", PITRAgent: "cairn.local/agent:dev"},
	{Name: "pg17", Engine: "postgres", Major: "17", Image: "cairn.local/postgres:17", Agent: "cairn.local/agent:dev-pg17", PITRAgent: "cairn.local/agent:dev-pg17"},
	{Name: "pg18", Engine: "postgres", Major: "18", Image: "cairn.local/postgres:18", Agent: "cairn.local/agent:dev-pg18", PITRAgent: "cairn.local/agent:dev-pg18"},
	{Name: "mariadb10.11", Engine: "mariadb", Major: "10.11", Agent: "cairn.local/agent:dev"},
	{Name: "mariadb11.8", Engine: "mariadb", Major: "11.8", Image: "cairn.local/mariadb:11.8", Agent: "cairn.local/agent:dev"},
	{Name: "mysql9.7", Engine: "mysql", Major: "9.7", Image: "cairn.local/mysql:9.7", Agent: "cairn.local/agent:dev-pg18"},
}

// MatrixCI is the oldest and the newest server of each engine.
var MatrixCI = []string{"pg13", "pg18", "mariadb10.11", "mariadb11.8", "mysql9.7"}

// EnvMatrix chooses the servers the version-matrix tests run against:
// "all" (`make test-matrix`), "ci" (the default: MatrixCI), "host" (the
// host's PostgreSQL 15 and MariaDB 10.11 only: no image needed), or a
// comma-separated list of names (pg17,mysql9.7).
const EnvMatrix = "CAIRN_DB_MATRIX"

// MatrixServers returns the chosen servers of engine ("postgres",
// "mariadb", "mysql"; empty: every engine), or an error naming the known
// ones for an unknown name.
func MatrixServers(engine string) ([]MatrixServer, error) {
	sel := strings.TrimSpace(os.Getenv(EnvMatrix))
	var names []string
	switch sel {
	case "", "ci":
		names = MatrixCI
	case "all":
		for _, s := range Matrix {
			names = append(names, s.Name)
		}
	case "host":
		names = []string{"pg15", "mariadb10.11"}
	default:
		for _, n := range strings.Split(sel, ",") {
			names = append(names, strings.TrimSpace(n))
		}
	}
	var out []MatrixServer
	for _, n := range names {
		i := slices.IndexFunc(Matrix, func(s MatrixServer) bool { return s.Name == n })
		if i < 0 {
			var known []string
			for _, s := range Matrix {
				known = append(known, s.Name)
			}
			return nil, fmt.Errorf("%s=%q: unknown server %q (known: all, ci, host, %s)", EnvMatrix, sel, n, strings.Join(known, ", "))
		}
		if engine == "" || Matrix[i].Engine == engine {
			out = append(out, Matrix[i])
		}
	}
	return out, nil
}

// MatrixServerNamed returns the matrix's server called name.
func MatrixServerNamed(name string) (MatrixServer, error) {
	for _, s := range Matrix {
		if s.Name == name {
			return s, nil
		}
	}
	return MatrixServer{}, fmt.Errorf("no server %q in the matrix", name)
}

// DB is a running server of the matrix, of any engine.
type DB interface {
	// Server is the matrix entry it runs.
	Server() MatrixServer
	// Port is its TCP port on 127.0.0.1.
	Port() int
	// SQL runs sql in database db (empty: none / the maintenance
	// database) as the superuser and returns the rows, tab-separated.
	SQL(db, sql string) (string, error)
	// AgentEnv configures an agent for database db on this server.
	AgentEnv(db string) []string
	// Version is the server's full version as it reports it.
	Version() (string, error)
	Stop()
}

// StartMatrix starts server s: a container of its image, or the host's
// own server. MySQL and MariaDB get user with password; PostgreSQL's
// superuser postgres gets password. binlog turns MySQL's and MariaDB's
// binary log on (MySQL's always is, with GTIDs).
func StartMatrix(s MatrixServer, user, password string, binlog bool) (DB, error) {
	switch {
	case s.Engine == "postgres" && s.Image == "":
		p, err := StartPostgres(password)
		if err != nil {
			return nil, err
		}
		return &hostPG{Postgres: p, s: s}, nil
	case s.Engine == "postgres":
		return StartPostgresContainer(s, password)
	case s.Image == "":
		start := StartMariaDB
		if binlog {
			start = StartMariaDBWithBinlog
		}
		m, err := start(user, password)
		if err != nil {
			return nil, err
		}
		return &hostMariaDB{MariaDB: m, s: s}, nil
	}
	return StartMySQLContainer(s, user, password, binlog)
}

type hostPG struct {
	*Postgres
	s MatrixServer
}

func (h *hostPG) Server() MatrixServer { return h.s }
func (h *hostPG) Port() int            { return h.Postgres.Port }
func (h *hostPG) SQL(db, sql string) (string, error) {
	if db == "" {
		db = "postgres"
	}
	return h.Postgres.SQL(db, sql)
}
func (h *hostPG) Version() (string, error) { return h.SQL("", "SHOW server_version") }
func (h *hostPG) AgentEnv(db string) []string {
	return pgAgentEnv(h.Postgres.Port, h.User, h.Password, db)
}

type hostMariaDB struct {
	*MariaDB
	s MatrixServer
}

func (h *hostMariaDB) Server() MatrixServer     { return h.s }
func (h *hostMariaDB) Port() int                { return h.MariaDB.Port }
func (h *hostMariaDB) Version() (string, error) { return h.SQL("", "SELECT VERSION()") }
func (h *hostMariaDB) AgentEnv(db string) []string {
	return myAgentEnv(h.MariaDB.Port, h.User, h.Password, db)
}

func pgAgentEnv(port int, user, password, db string) []string {
	return []string{"CAIRN_ENGINE=postgres", "CAIRN_DB_HOST=127.0.0.1", "CAIRN_DB_PORT=" + strconv.Itoa(port),
		"CAIRN_DB_NAME=" + db, "CAIRN_DB_USER=" + user, "CAIRN_DB_PASSWORD=" + password}
}

func myAgentEnv(port int, user, password, db string) []string {
	return []string{"CAIRN_ENGINE=mysql", "CAIRN_DB_HOST=127.0.0.1", "CAIRN_DB_PORT=" + strconv.Itoa(port),
		"CAIRN_DB_NAME=" + db, "CAIRN_DB_USER=" + user, "CAIRN_DB_PASSWORD=" + password}
}

// execTimeout bounds one SQL statement run through docker exec.
const execTimeout = 5 * time.Minute

func execCtx() (context.Context, context.CancelFunc) {
	return context.WithTimeout(context.Background(), execTimeout)
}
