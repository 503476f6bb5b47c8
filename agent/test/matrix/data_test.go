package matrix_test

import (
	"fmt"
	"strings"

	"cairn.dev/agent/internal/testenv"
)

// createDB creates an empty database db on s.
func createDB(s testenv.DB, db string) error {
	_, err := s.SQL("", "CREATE DATABASE "+db)
	return err
}

// seed creates db on s with tables of varied types, a foreign key and a
// view, and a few thousand rows, written the same way on every version.
func seed(s testenv.DB, db string) error {
	if err := createDB(s, db); err != nil {
		return err
	}
	if s.Server().Engine == "postgres" {
		_, err := s.SQL(db, `
CREATE TABLE items (id bigserial PRIMARY KEY, name text NOT NULL, price numeric(12,2), tags text[], meta jsonb,
  made timestamptz, data bytea);
INSERT INTO items (name, price, tags, meta, made, data)
  SELECT 'item ' || g || ' ünïcödé', g * 1.25, ARRAY['a' || g % 7, 'b'], jsonb_build_object('g', g, 'odd', g % 2 = 1),
         '2026-01-01 00:00:00+00'::timestamptz + g * interval '1 minute', decode(md5(g::text), 'hex')
  FROM generate_series(1, 5000) g;
CREATE TABLE orders (id int PRIMARY KEY, item_id bigint REFERENCES items(id), qty int, note varchar(50));
INSERT INTO orders SELECT g, g % 5000 + 1, g % 13, CASE WHEN g % 3 = 0 THEN NULL ELSE 'n' || g END
  FROM generate_series(1, 3000) g;
CREATE VIEW big_orders AS SELECT * FROM orders WHERE qty > 10;`)
		return err
	}
	_, err := s.SQL(db, `
CREATE TABLE digits (d INT PRIMARY KEY);
INSERT INTO digits VALUES (0),(1),(2),(3),(4),(5),(6),(7),(8),(9);
CREATE TABLE items (id BIGINT AUTO_INCREMENT PRIMARY KEY, name VARCHAR(100) NOT NULL, price DECIMAL(12,2),
  meta JSON, made DATETIME(3), data VARBINARY(32)) DEFAULT CHARSET=utf8mb4;
INSERT INTO items (name, price, meta, made, data)
  SELECT CONCAT('item ', g, ' ünïcödé'), g * 1.25, JSON_OBJECT('g', g), '2026-01-01' + INTERVAL g MINUTE, UNHEX(SHA2(g, 256))
  FROM (SELECT a.d + 10 * b.d + 100 * c.d + 1000 * e.d + 1 AS g FROM digits a, digits b, digits c, digits e) n
  WHERE g <= 5000 ORDER BY g;
CREATE TABLE orders (id INT PRIMARY KEY, item_id BIGINT, qty INT, note VARCHAR(50),
  FOREIGN KEY (item_id) REFERENCES items(id)) DEFAULT CHARSET=utf8mb4;
INSERT INTO orders SELECT id, id % 5000 + 1, id % 13, IF(id % 3 = 0, NULL, CONCAT('n', id)) FROM items WHERE id <= 3000;
CREATE VIEW big_orders AS SELECT * FROM orders WHERE qty > 10;`)
	return err
}

// fingerprint is each table's row count and a checksum of its rows in
// key order, and the views, computed by the server.
func fingerprint(s testenv.DB, db string) (string, error) {
	var out []string
	for _, t := range []string{"items", "orders", "big_orders"} {
		var q string
		if s.Server().Engine == "postgres" {
			q = fmt.Sprintf("SELECT count(*) || ' ' || coalesce(md5(string_agg(t::text, '|' ORDER BY t.id)), '-') FROM %s t", t)
		} else {
			q = fmt.Sprintf("SET SESSION group_concat_max_len = 1073741824; "+
				"SELECT CONCAT(COUNT(*), ' ', COALESCE(SHA2(GROUP_CONCAT(CONCAT_WS(',', id, %s) ORDER BY id SEPARATOR '|'), 256), '-')) FROM %s",
				map[string]string{"items": "name, price, meta, made, HEX(data)", "orders": "item_id, qty, COALESCE(note, 'NULL')",
					"big_orders": "item_id, qty, COALESCE(note, 'NULL')"}[t], t)
		}
		v, err := s.SQL(db, q)
		if err != nil {
			return "", fmt.Errorf("fingerprint %s.%s: %w", db, t, err)
		}
		out = append(out, t+": "+strings.TrimSpace(v))
	}
	return strings.Join(out, "\n"), nil
}
