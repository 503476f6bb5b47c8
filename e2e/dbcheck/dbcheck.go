// Package dbcheck fills a database with a small shop (customers, orders,
// order_items; real rows) and reads back, per table, the row count and a
// content checksum, for PostgreSQL and MariaDB: what the e2e suite and the
// demo compare between a backed-up database and its restored copy.
package dbcheck

import (
	"fmt"
	"strconv"
	"strings"
)

// SQLRunner runs SQL in a database and returns tab- or |-separated rows
// (agent/testservers' Postgres and MariaDB).
type SQLRunner interface {
	SQL(db, sql string) (string, error)
}

// Table is one table's row count and content checksum (MD5 of its rows as
// text, in primary-key order).
type Table struct {
	Name     string
	Rows     int64
	Checksum string
}

// Tables of the shop, in the order they are compared and printed.
var Tables = []string{"customers", "orders", "order_items"}

// SeedPostgres creates database db with the shop: orders rows, a tenth as
// many customers, two items per order.
func SeedPostgres(pg SQLRunner, db string, orders int) error {
	if _, err := pg.SQL("postgres", "CREATE DATABASE "+db); err != nil {
		return err
	}
	customers := max(orders/10, 1)
	_, err := pg.SQL(db, fmt.Sprintf(`
CREATE TABLE customers (id int PRIMARY KEY, name text NOT NULL, email text);
INSERT INTO customers SELECT g, 'customer ' || g, 'c' || g || '@example.com' FROM generate_series(1, %[2]d) g;
CREATE TABLE orders (id bigint PRIMARY KEY, customer_id int NOT NULL REFERENCES customers(id), amount numeric(10,2) NOT NULL,
  status text NOT NULL, created_at timestamptz NOT NULL);
INSERT INTO orders SELECT g, 1 + g %% %[2]d, (g * 7919 %% 100000) / 100.0, (ARRAY['new','paid','shipped'])[1 + g %% 3],
  timestamptz '2026-01-01 00:00:00+00' + g * interval '1 minute' FROM generate_series(1, %[1]d) g;
CREATE TABLE order_items (order_id bigint NOT NULL REFERENCES orders(id), line int NOT NULL, sku text NOT NULL, qty int NOT NULL,
  PRIMARY KEY (order_id, line));
INSERT INTO order_items SELECT o, l, 'SKU-' || ((o * 31 + l) %% 500), 1 + (o + l) %% 5 FROM generate_series(1, %[1]d) o, generate_series(1, 2) l;
`, orders, customers))
	return err
}

// PostgresTables reads every table of the public schema of db.
func PostgresTables(pg SQLRunner, db string) ([]Table, error) {
	names, err := pg.SQL(db, "SELECT tablename FROM pg_tables WHERE schemaname = 'public' ORDER BY 1")
	if err != nil {
		return nil, err
	}
	var out []Table
	for _, name := range strings.Fields(names) {
		row, err := pg.SQL(db, fmt.Sprintf(`SELECT count(*), md5(coalesce(string_agg(t::text, E'\n' ORDER BY t::text), '')) FROM %q t`, name))
		if err != nil {
			return nil, err
		}
		t, err := parse(name, row, "|")
		if err != nil {
			return nil, err
		}
		out = append(out, t)
	}
	return out, nil
}

// SeedMariaDB creates database db with the same shop as SeedPostgres.
func SeedMariaDB(m SQLRunner, db string, orders int) error {
	customers := max(orders/10, 1)
	_, err := m.SQL("", fmt.Sprintf(`
SET SESSION max_recursive_iterations = 10000000;
CREATE DATABASE %[3]s;
USE %[3]s;
CREATE TABLE customers (id INT PRIMARY KEY, name VARCHAR(100) NOT NULL, email VARCHAR(100));
INSERT INTO customers WITH RECURSIVE s(g) AS (SELECT 1 UNION ALL SELECT g + 1 FROM s WHERE g < %[2]d)
  SELECT g, CONCAT('customer ', g), CONCAT('c', g, '@example.com') FROM s;
CREATE TABLE orders (id BIGINT PRIMARY KEY, customer_id INT NOT NULL, amount DECIMAL(10,2) NOT NULL, status VARCHAR(16) NOT NULL,
  created_at DATETIME NOT NULL, FOREIGN KEY (customer_id) REFERENCES customers(id));
INSERT INTO orders WITH RECURSIVE s(g) AS (SELECT 1 UNION ALL SELECT g + 1 FROM s WHERE g < %[1]d)
  SELECT g, 1 + g %% %[2]d, (g * 7919 %% 100000) / 100.0, ELT(1 + g %% 3, 'new', 'paid', 'shipped'),
  TIMESTAMP '2026-01-01 00:00:00' + INTERVAL g MINUTE FROM s;
CREATE TABLE order_items (order_id BIGINT NOT NULL, line INT NOT NULL, sku VARCHAR(16) NOT NULL, qty INT NOT NULL,
  PRIMARY KEY (order_id, line), FOREIGN KEY (order_id) REFERENCES orders(id));
INSERT INTO order_items SELECT id, l.line, CONCAT('SKU-', (id * 31 + l.line) %% 500), 1 + (id + l.line) %% 5
  FROM orders, (SELECT 1 AS line UNION ALL SELECT 2) l;
`, orders, customers, db))
	return err
}

// MariaDBTables reads every base table of db.
func MariaDBTables(m SQLRunner, db string) ([]Table, error) {
	names, err := m.SQL("", fmt.Sprintf("SELECT TABLE_NAME FROM information_schema.TABLES WHERE TABLE_SCHEMA = '%s' AND TABLE_TYPE = 'BASE TABLE' ORDER BY 1", db))
	if err != nil {
		return nil, err
	}
	var out []Table
	for _, name := range strings.Fields(names) {
		cols, err := m.SQL("", fmt.Sprintf("SELECT GROUP_CONCAT(CONCAT('`', COLUMN_NAME, '`') ORDER BY ORDINAL_POSITION) FROM information_schema.COLUMNS WHERE TABLE_SCHEMA = '%s' AND TABLE_NAME = '%s'", db, name))
		if err != nil {
			return nil, err
		}
		row, err := m.SQL(db, fmt.Sprintf("SET SESSION group_concat_max_len = 1073741824; SELECT COUNT(*), MD5(COALESCE(GROUP_CONCAT(CONCAT_WS('\\t', %[1]s) ORDER BY %[1]s SEPARATOR '\\n'), '')) FROM `%[2]s`", cols, name))
		if err != nil {
			return nil, err
		}
		t, err := parse(name, row, "\t")
		if err != nil {
			return nil, err
		}
		out = append(out, t)
	}
	return out, nil
}

func parse(name, row, sep string) (Table, error) {
	count, sum, ok := strings.Cut(strings.TrimSpace(row), sep)
	if !ok {
		return Table{}, fmt.Errorf("dbcheck: table %s: unexpected row %q", name, row)
	}
	n, err := strconv.ParseInt(count, 10, 64)
	if err != nil {
		return Table{}, fmt.Errorf("dbcheck: table %s: %w", name, err)
	}
	return Table{Name: name, Rows: n, Checksum: sum}, nil
}

// PostgresDatabaseExists reports whether db exists on the PostgreSQL server.
func PostgresDatabaseExists(pg SQLRunner, db string) (bool, error) {
	out, err := pg.SQL("postgres", fmt.Sprintf("SELECT count(*) FROM pg_database WHERE datname = '%s'", db))
	return strings.TrimSpace(out) == "1", err
}

// MariaDBDatabaseExists reports whether db exists on the MariaDB server.
func MariaDBDatabaseExists(m SQLRunner, db string) (bool, error) {
	out, err := m.SQL("", fmt.Sprintf("SELECT COUNT(*) FROM information_schema.SCHEMATA WHERE SCHEMA_NAME = '%s'", db))
	return strings.TrimSpace(out) == "1", err
}
