package postgres_test

import (
	"fmt"
	"strconv"
	"strings"

	"cairn.dev/agent/internal/testenv"
	"cairn.dev/agent/test/suite"
)

// pg adapts a private PostgreSQL 15 server to the suite.
type pg struct{ *testenv.Postgres }

func startPG() (suite.DB, error) {
	p, err := testenv.StartPostgres(suite.DBPassword)
	if err != nil {
		return nil, err
	}
	return pg{p}, nil
}

func (p pg) Engine() string { return "postgres" }
func (p pg) Port() int      { return p.Postgres.Port }

func (p pg) AgentEnv(db string) []string {
	return []string{
		"CAIRN_ENGINE=postgres",
		"CAIRN_DB_HOST=127.0.0.1",
		"CAIRN_DB_PORT=" + strconv.Itoa(p.Postgres.Port),
		"CAIRN_DB_NAME=" + db,
		"CAIRN_DB_USER=" + p.User,
		"CAIRN_DB_PASSWORD=" + p.Password,
	}
}

func (p pg) Create(db string) error {
	_, err := p.SQL("postgres", "CREATE DATABASE "+ident(db))
	return err
}

func (p pg) Drop(db string) error {
	_, err := p.SQL("postgres", "DROP DATABASE IF EXISTS "+ident(db)+" WITH (FORCE)")
	return err
}

// ident quotes a PostgreSQL identifier.
func ident(s string) string { return `"` + strings.ReplaceAll(s, `"`, `""`) + `"` }

func (p pg) Seed(db string) error {
	if err := p.Drop(db); err != nil {
		return err
	}
	if err := p.Create(db); err != nil {
		return err
	}
	_, err := p.SQL(db, seedSQL)
	return err
}

const seedSQL = `
SET TimeZone = 'America/New_York';
CREATE TABLE customers (
  id         bigint PRIMARY KEY,
  name       text NOT NULL,
  email      varchar(200),
  balance    numeric(30,10),
  ratio      double precision,
  created_at timestamptz,
  local_at   timestamp,
  birthday   date,
  active     boolean,
  avatar     bytea,
  tags       text[],
  profile    jsonb,
  uid        uuid
);
INSERT INTO customers
SELECT i,
  (ARRAY['Zoë','Jürgen Müller','渡辺 直美','Ольга','🙂🚀 emoji','O''Brien; DROP','tab	tab','new
line','back\slash','a"quote'])[1 + i % 10] || ' #' || i,
  CASE WHEN i % 7 = 0 THEN NULL ELSE 'user' || i || '@example.com' END,
  CASE WHEN i % 11 = 0 THEN NULL ELSE (i * 12345.6789012345 - 1e6)::numeric(30,10) END,
  CASE WHEN i % 13 = 0 THEN NULL ELSE i / 7.0 END,
  CASE WHEN i % 5 = 0 THEN NULL ELSE timestamptz '2024-03-10 01:30:00+05:30' + i * interval '37 minutes' END,
  timestamp '2000-02-28 23:59:59.999999' + i * interval '1 day 3 seconds',
  date '1969-12-31' + i,
  CASE WHEN i % 3 = 0 THEN NULL ELSE i % 2 = 0 END,
  CASE WHEN i % 4 = 0 THEN NULL ELSE decode(md5(i::text) || md5((i + 1)::text), 'hex') || '\x00ff00'::bytea END,
  CASE WHEN i % 6 = 0 THEN NULL ELSE ARRAY['a' || i, 'b,c', NULL] END,
  CASE WHEN i % 8 = 0 THEN NULL ELSE jsonb_build_object('i', i, 'name', 'ñ' || i, 'nested', jsonb_build_object('ok', i % 2 = 0)) END,
  md5(i::text)::uuid
FROM generate_series(1, 3000) AS i;

CREATE TABLE orders (
  id          serial PRIMARY KEY,
  customer_id bigint NOT NULL REFERENCES customers(id),
  total       numeric(12,2),
  note        text,
  placed_at   timestamptz DEFAULT now()
);
INSERT INTO orders (customer_id, total, note, placed_at)
SELECT 1 + i % 3000, (i % 1000) * 1.25,
  CASE WHEN i % 9 = 0 THEN NULL ELSE repeat('x€', i % 50) END,
  timestamptz '2023-01-01 00:00:00 UTC' + i * interval '1 hour'
FROM generate_series(1, 5000) AS i;
CREATE INDEX orders_customer ON orders (customer_id);
CREATE VIEW big_spenders AS SELECT customer_id, sum(total) AS spent FROM orders GROUP BY customer_id;
CREATE FUNCTION add_one(integer) RETURNS integer LANGUAGE sql IMMUTABLE AS 'SELECT $1 + 1';
`

func (p pg) SeedBig(db string, mb int) error {
	// 1 KiB of random-looking bytes a row (32 SHA-256 digests).
	_, err := p.SQL(db, fmt.Sprintf(`
CREATE TABLE IF NOT EXISTS blobs (id int PRIMARY KEY, data bytea);
INSERT INTO blobs
SELECT i, (SELECT string_agg(sha256((i * 100 + j)::text::bytea), ''::bytea) FROM generate_series(1, 32) AS j)
FROM generate_series(1, %d) AS i;`, mb*1024))
	return err
}

func (p pg) Mutate(db string) error {
	_, err := p.SQL(db, `
UPDATE customers SET name = name || ' (changed)', balance = balance + 1 WHERE id % 10 = 1;
DELETE FROM orders WHERE id % 17 = 0;
INSERT INTO orders (customer_id, total, note) VALUES (1, 99.99, 'after backup');`)
	return err
}

func (p pg) Fingerprint(db string) (string, error) {
	return p.SQL(db, `
SET TimeZone = 'UTC';
SELECT 'customers', count(*), md5(coalesce(string_agg(c::text, E'\n' ORDER BY id), '')) FROM customers AS c
UNION ALL
SELECT 'orders', count(*), md5(coalesce(string_agg(o::text, E'\n' ORDER BY id), '')) FROM orders AS o
UNION ALL
SELECT 'orders_id_seq', last_value, is_called::text FROM orders_id_seq
UNION ALL
SELECT 'big_spenders', count(*), md5(coalesce(string_agg(b::text, E'\n' ORDER BY customer_id), '')) FROM big_spenders AS b
UNION ALL
SELECT 'add_one(41)', add_one(41), ''
UNION ALL
SELECT 'indexes', count(*), string_agg(indexname, ',' ORDER BY indexname) FROM pg_indexes WHERE schemaname = 'public';`)
}
