package inventory

import (
	"context"
	"database/sql"
	"fmt"
	"net"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/go-sql-driver/mysql"

	"cairn.dev/agent/internal/engine"
	"cairn.dev/agent/patterns"
)

// MySQL is a connection to a MySQL or MariaDB database.
type MySQL struct {
	Conn engine.Conn
	DB   *sql.DB
	// C is the one connection everything runs on (one snapshot).
	C *sql.Conn
}

// MySQLConfig is the driver configuration for database db of c: fields,
// never a DSN string, so no value can add options. Sessions run in time
// zone +00:00 with utf8mb4.
func MySQLConfig(c engine.Conn, db string) *mysql.Config {
	port := c.Port
	if port == 0 {
		port = 3306
	}
	cfg := mysql.NewConfig()
	cfg.User, cfg.Passwd = c.User, c.Password
	cfg.Net, cfg.Addr = "tcp", net.JoinHostPort(c.Host, strconv.Itoa(port))
	cfg.DBName = db
	cfg.Timeout = 15 * time.Second
	cfg.TLSConfig = "preferred"
	cfg.Collation = "utf8mb4_general_ci"
	cfg.Params = map[string]string{"time_zone": "'+00:00'"}
	cfg.MultiStatements = false
	return cfg
}

// ConnectMySQL opens one connection to database db of c.
func ConnectMySQL(ctx context.Context, c engine.Conn, db string) (*sql.DB, *sql.Conn, error) {
	connector, err := mysql.NewConnector(MySQLConfig(c, db))
	if err != nil {
		return nil, nil, fmt.Errorf("connection settings for %s: %v", c.Host, redact(err, c.Password))
	}
	pool := sql.OpenDB(connector)
	pool.SetMaxIdleConns(1)
	conn, err := pool.Conn(ctx)
	if err == nil {
		err = conn.PingContext(ctx)
	}
	if err != nil {
		pool.Close()
		return nil, nil, fmt.Errorf("connect to MySQL %s:%d database %q as %q: %v", c.Host, c.Port, db, c.User, redact(err, c.Password))
	}
	return pool, conn, nil
}

// OpenMySQL connects to c's database.
func OpenMySQL(ctx context.Context, c engine.Conn) (*MySQL, error) {
	pool, conn, err := ConnectMySQL(ctx, c, c.Database)
	if err != nil {
		return nil, err
	}
	return &MySQL{Conn: c, DB: pool, C: conn}, nil
}

func (m *MySQL) Engine() string { return "mysql" }

func (m *MySQL) Close() error {
	m.C.Close()
	return m.DB.Close()
}

func (m *MySQL) Version(ctx context.Context) (string, error) {
	var v string
	err := m.C.QueryRowContext(ctx, "SELECT VERSION()").Scan(&v)
	return v, err
}

// QuoteIdent quotes a MySQL identifier.
func QuoteIdent(s string) string { return "`" + strings.ReplaceAll(s, "`", "``") + "`" }

type sqlQuerier interface {
	QueryContext(ctx context.Context, query string, args ...any) (*sql.Rows, error)
}

// Tables lists the base tables of the database that f selects; the schema
// part of a pattern matches schemaName (default: the database's name).
func (m *MySQL) Tables(ctx context.Context, f *patterns.Filter, schemaName string) ([]Table, error) {
	return m.tables(ctx, m.C, f, schemaName)
}

func (m *MySQL) tables(ctx context.Context, q sqlQuerier, f *patterns.Filter, schemaName string) ([]Table, error) {
	if schemaName == "" {
		schemaName = m.Conn.Database
	}
	rows, err := q.QueryContext(ctx, `SELECT table_name, coalesce(data_length, 0) + coalesce(index_length, 0)
FROM information_schema.tables WHERE table_schema = DATABASE() AND table_type = 'BASE TABLE' ORDER BY table_name`)
	if err != nil {
		return nil, fmt.Errorf("list tables: %w", err)
	}
	defer rows.Close()
	var out []Table
	for rows.Next() {
		var t Table
		if err := rows.Scan(&t.Name, &t.Bytes); err != nil {
			return nil, err
		}
		if f.Match(schemaName, t.Name) {
			out = append(out, t)
		}
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("list tables: %w", err)
	}
	sortTables(out)
	return out, nil
}

// BeginConsistent starts a REPEATABLE READ read-only transaction WITH
// CONSISTENT SNAPSHOT on conn: every read after it sees one point in time.
func BeginConsistent(ctx context.Context, conn *sql.Conn) error {
	for _, s := range []string{
		"SET SESSION TRANSACTION ISOLATION LEVEL REPEATABLE READ",
		"START TRANSACTION WITH CONSISTENT SNAPSHOT, READ ONLY",
	} {
		if _, err := conn.ExecContext(ctx, s); err != nil {
			return fmt.Errorf("%s: %w", s, err)
		}
	}
	return nil
}

// Take lists and counts (and checksums) the selected tables in one
// consistent-snapshot transaction on one connection (MySQL has no way to
// share a snapshot between connections); o.Parallel and o.Snapshot do not
// apply. TakeInTransaction reads in a transaction the caller started.
func (m *MySQL) Take(ctx context.Context, o Options) (*Inventory, error) {
	if err := BeginConsistent(ctx, m.C); err != nil {
		return nil, err
	}
	defer m.C.ExecContext(context.Background(), "ROLLBACK")
	return m.TakeInTransaction(ctx, o)
}

// TakeInTransaction takes the inventory on m.C as it is: the caller began
// the transaction (BeginConsistent) at the point in time it wants.
func (m *MySQL) TakeInTransaction(ctx context.Context, o Options) (*Inventory, error) {
	tables, err := m.tables(ctx, m.C, o.Filter, o.SchemaName)
	if err != nil {
		return nil, err
	}
	inv := &Inventory{Method: o.Method, Consistent: true, Tables: tables}
	if o.Method == MethodList || o.Method == "" {
		inv.Method = MethodList
		return inv, nil
	}
	for i := range inv.Tables {
		if err := m.count(ctx, &inv.Tables[i], o.Method); err != nil {
			return nil, err
		}
	}
	return inv, nil
}

// Counted turns a List inventory taken on m.C (in the dump's snapshot,
// still open) into a RowCount one whose counts come from counts (a
// SQLDumpCounter's: what the artifact holds); a table counts lacks (nil
// counts: all) is counted with count(*) on m.C and named in scanned.
func (m *MySQL) Counted(ctx context.Context, listed *Inventory, counts map[string]int64) (inv *Inventory, scanned []string, err error) {
	inv = &Inventory{Method: MethodRowCount, Consistent: listed.Consistent, Tables: slices.Clone(listed.Tables)}
	for i := range inv.Tables {
		t := &inv.Tables[i]
		if n, ok := counts[t.Name]; ok {
			t.Rows = n
			continue
		}
		if err := m.count(ctx, t, MethodRowCount); err != nil {
			return nil, nil, err
		}
		scanned = append(scanned, t.Key())
	}
	return inv, scanned, nil
}

// hexTypes are column types whose bytes are hashed (as HEX()): strings in
// any character set, binary data, and types that convert to either.
var hexTypes = map[string]bool{
	"char": true, "varchar": true, "tinytext": true, "text": true, "mediumtext": true, "longtext": true,
	"binary": true, "varbinary": true, "tinyblob": true, "blob": true, "mediumblob": true, "longblob": true,
	"enum": true, "set": true, "json": true, "bit": true,
	"geometry": true, "point": true, "linestring": true, "polygon": true, "multipoint": true,
	"multilinestring": true, "multipolygon": true, "geometrycollection": true, "geomcollection": true,
	"inet4": true, "inet6": true, "uuid": true,
}

// floatTypes are floating-point column types, hashed at full precision.
var floatTypes = map[string]bool{"float": true, "double": true, "real": true, "double precision": true}

// rowExpr is the SQL expression of a row's text (see the package comment).
func (m *MySQL) rowExpr(ctx context.Context, table string) (string, error) {
	rows, err := m.C.QueryContext(ctx, `SELECT column_name, data_type FROM information_schema.columns
WHERE table_schema = DATABASE() AND table_name = ? ORDER BY ordinal_position`, table)
	if err != nil {
		return "", fmt.Errorf("columns of %s: %w", table, err)
	}
	defer rows.Close()
	var parts []string
	for rows.Next() {
		var col, typ string
		if err := rows.Scan(&col, &typ); err != nil {
			return "", err
		}
		e := QuoteIdent(col)
		switch t := strings.ToLower(typ); {
		case hexTypes[t]:
			e = "HEX(" + e + ")"
		case floatTypes[t]:
			// A FLOAT prints with 6 significant digits, a FLOAT(M,D) or
			// DOUBLE(M,D) with D decimals: values that differ print the
			// same. As a DOUBLE expression (exact for a FLOAT) it prints
			// the shortest text that reads back as the same double.
			e = "(" + e + " + 0e0)"
		}
		parts = append(parts, "IFNULL("+e+", '~')")
	}
	if err := rows.Err(); err != nil {
		return "", err
	}
	if len(parts) == 0 {
		return "", fmt.Errorf("table %s has no columns", table)
	}
	return "CONCAT_WS(','," + strings.Join(parts, ",") + ")", nil
}

func (m *MySQL) count(ctx context.Context, t *Table, method string) error {
	name := QuoteIdent(t.Name)
	if method == MethodRowCount {
		if err := m.C.QueryRowContext(ctx, "SELECT COUNT(*) FROM "+name).Scan(&t.Rows); err != nil {
			return fmt.Errorf("count %s: %w", t.Key(), err)
		}
		return nil
	}
	expr, err := m.rowExpr(ctx, t.Name)
	if err != nil {
		return err
	}
	var sum string
	err = m.C.QueryRowContext(ctx, "SELECT COUNT(*), CAST(COALESCE(SUM(CAST(CONV(LEFT(MD5("+expr+
		"), 16), 16, 10) AS UNSIGNED)), 0) AS CHAR) FROM "+name).Scan(&t.Rows, &sum)
	if err != nil {
		return fmt.Errorf("checksum %s: %w", t.Key(), err)
	}
	t.Checksum, err = foldSum(sum)
	return err
}
