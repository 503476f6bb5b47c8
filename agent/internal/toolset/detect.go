// Package toolset finds which server a run talks to and chooses, among the
// database tools this agent image carries, ones that can serve it: for
// PostgreSQL the bin folder of a major at least the server's (pg_dump dumps
// servers of its own major and older; pg_basebackup and pg_receivewal
// refuse newer servers), exactly the source's major for a point-in-time
// replay (the recovery server must be of the cluster's major); for MySQL
// Oracle's own client tools; for MariaDB MariaDB's. When the image carries
// none that can, the run fails at once with an *UnsupportedError, whose
// exit code (contract.ExitUnsupported) and failure code
// (contract.CodeUnsupportedServer) an operator can act on.
package toolset

import (
	"context"
	"fmt"
	"strconv"
	"strings"

	"cairn.dev/agent/contract"
	"cairn.dev/agent/internal/engine"
	"cairn.dev/agent/internal/inventory"
)

// Server is what a database server says it is.
type Server struct {
	// Engine is "postgres", "mysql" (Oracle MySQL) or "mariadb".
	Engine string
	// Version is the server's version as it reports it, e.g. "18.1",
	// "9.7.4", "11.8.3" (MariaDB's "-MariaDB…" suffix cut).
	Version string
	// Major and Minor: PostgreSQL 18.1 is 18, 1; MySQL 9.7.4 is 9, 7.
	Major, Minor int
}

// Name is the product's name: PostgreSQL, MySQL or MariaDB.
func (s Server) Name() string {
	switch s.Engine {
	case "postgres":
		return "PostgreSQL"
	case "mariadb":
		return "MariaDB"
	}
	return "MySQL"
}

func (s Server) String() string { return s.Name() + " " + s.Version }

// Info is the result report's form of s.
func (s Server) Info() *contract.ServerInfo {
	return &contract.ServerInfo{Engine: s.Engine, Version: s.Version}
}

// Detect connects to c's server (database db: empty means the maintenance
// database, "postgres", or none for MySQL) and reads its version:
// server_version_num and server_version on PostgreSQL, VERSION() and
// @@version_comment on MySQL and MariaDB.
func Detect(ctx context.Context, engineName string, c engine.Conn, db string) (Server, error) {
	switch engineName {
	case "postgres":
		if db == "" {
			db = "postgres"
		}
		conn, err := inventory.ConnectPostgres(ctx, c, db)
		if err != nil {
			return Server{}, err
		}
		defer conn.Close(context.WithoutCancel(ctx))
		var num, version string
		if err := conn.QueryRow(ctx, "SELECT current_setting('server_version_num'), current_setting('server_version')").Scan(&num, &version); err != nil {
			return Server{}, fmt.Errorf("read the PostgreSQL server's version: %w", err)
		}
		return parsePostgres(num, version)
	case "mysql":
		pool, conn, err := inventory.ConnectMySQL(ctx, c, db)
		if err != nil {
			return Server{}, err
		}
		defer pool.Close()
		defer conn.Close()
		var version, comment string
		if err := conn.QueryRowContext(ctx, "SELECT VERSION(), @@version_comment").Scan(&version, &comment); err != nil {
			return Server{}, fmt.Errorf("read the MySQL server's version: %w", err)
		}
		return parseMySQL(version, comment)
	}
	return Server{}, fmt.Errorf("unknown engine %q (want postgres or mysql)", engineName)
}

// parsePostgres reads server_version_num (e.g. 180001; 90624 before 10)
// and server_version ("18.1 (Debian 18.1-1)").
func parsePostgres(num, version string) (Server, error) {
	n, err := strconv.Atoi(strings.TrimSpace(num))
	if err != nil || n < 90000 {
		return Server{}, fmt.Errorf("PostgreSQL server_version_num %q: not a version this agent knows", num)
	}
	s := Server{Engine: "postgres", Major: n / 10000, Minor: n % 10000}
	if n < 100000 { // 9.6.24 is 90624
		s.Minor = n / 100 % 100
	}
	s.Version, _, _ = strings.Cut(strings.TrimSpace(version), " ")
	if s.Version == "" {
		s.Version = strconv.Itoa(s.Major) + "." + strconv.Itoa(s.Minor)
	}
	return s, nil
}

// parseMySQL reads VERSION() ("9.7.4", "8.4.3-log", "11.8.3-MariaDB-1
// from Debian") and @@version_comment ("MySQL Community Server - GPL",
// "Debian n/a", "mariadb.org binary distribution").
func parseMySQL(version, comment string) (Server, error) {
	s := Server{Engine: "mysql"}
	if strings.Contains(version, "MariaDB") || strings.Contains(strings.ToLower(comment), "mariadb") {
		s.Engine = "mariadb"
	}
	v := version
	if i := strings.IndexFunc(v, func(r rune) bool { return r != '.' && (r < '0' || r > '9') }); i >= 0 {
		v = v[:i]
	}
	// MariaDB 10 once reported "5.5.5-10.x.y-MariaDB" to old clients.
	if rest, ok := strings.CutPrefix(version, "5.5.5-"); ok && s.Engine == "mariadb" {
		return parseMySQL(rest, comment)
	}
	f := strings.Split(v, ".")
	if len(f) < 2 {
		return Server{}, fmt.Errorf("server version %q: not a version this agent knows", version)
	}
	var err error
	if s.Major, err = strconv.Atoi(f[0]); err != nil {
		return Server{}, fmt.Errorf("server version %q: %v", version, err)
	}
	if s.Minor, err = strconv.Atoi(f[1]); err != nil {
		return Server{}, fmt.Errorf("server version %q: %v", version, err)
	}
	s.Version = v
	return s, nil
}

// ParseVersion reads a version recorded earlier (Server.Version, e.g. in a
// catalog entry) back into a Server.
func ParseVersion(engineName, version string) (Server, error) {
	if engineName == "postgres" {
		major, minor, _ := strings.Cut(version, ".")
		m, err := strconv.Atoi(major)
		if err != nil {
			return Server{}, fmt.Errorf("PostgreSQL version %q: %v", version, err)
		}
		n, _ := strconv.Atoi(minor)
		return Server{Engine: engineName, Version: version, Major: m, Minor: n}, nil
	}
	s, err := parseMySQL(version, "")
	if err == nil && engineName == "mariadb" {
		s.Engine = engineName
	}
	return s, err
}
