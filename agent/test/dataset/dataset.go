// Package dataset makes the multi-table PostgreSQL database that parallel
// backups and restores are measured on (issue 26): a few tables of about
// equal size, each with a primary key and two secondary indexes, rows of
// mixed types (text, numeric, timestamptz, jsonb, bytea). `make
// bench-agent` measures on it and the demo's recovery-time step
// (e2e/cmd/demo) shows a ProtectionPlan's measured RTO on it.
package dataset

import (
	"fmt"
	"strconv"
	"strings"
)

// SQLRunner runs SQL in a database and returns its rows as text
// (agent/testservers' Postgres).
type SQLRunner interface {
	SQL(db, sql string) (string, error)
}

// Postgres creates database db (dropping one of that name first) with
// tables tables events_1..events_N of about target/tables bytes each (table,
// indexes and TOAST: pg_total_relation_size), and returns their total
// size. Rows are inserted in batches sized from the rows so far, so the
// tables end within one batch of their share.
func Postgres(pg SQLRunner, db string, tables int, target int64) (int64, error) {
	if tables < 1 || target < 1 {
		return 0, fmt.Errorf("dataset: %d tables of %d bytes: need at least one table and one byte", tables, target)
	}
	if _, err := pg.SQL("postgres", fmt.Sprintf("DROP DATABASE IF EXISTS %s", db)); err != nil {
		return 0, err
	}
	if _, err := pg.SQL("postgres", fmt.Sprintf("CREATE DATABASE %s", db)); err != nil {
		return 0, err
	}
	share := target / int64(tables)
	var total int64
	for i := 1; i <= tables; i++ {
		t := fmt.Sprintf("events_%d", i)
		if _, err := pg.SQL(db, fmt.Sprintf(`
CREATE TABLE %[1]s (
  id         bigint PRIMARY KEY,
  account    text NOT NULL,
  amount     numeric(14,2),
  created_at timestamptz NOT NULL,
  kind       text,
  attrs      jsonb,
  payload    bytea
);
CREATE INDEX %[1]s_account ON %[1]s (account);
CREATE INDEX %[1]s_created ON %[1]s (created_at, kind);`, t)); err != nil {
			return 0, err
		}
		var next, batch, n int64 = 1, 20_000, 0
		for n < share {
			if _, err := pg.SQL(db, fmt.Sprintf(`
INSERT INTO %s
SELECT g, 'acct-' || (g %% 50000), ((g * 7919) %% 1000000) / 100.0,
  TIMESTAMPTZ '2024-01-01 00:00:00+00' + g * INTERVAL '1 second',
  (ARRAY['deposit','withdrawal','transfer','fee','refund'])[1 + g %% 5],
  jsonb_build_object('ip', '10.' || (g %% 256) || '.' || (g * 7 %% 256) || '.1', 'ok', g %% 3 <> 0, 'note', md5(g::text)),
  decode(md5(g || 'a') || md5(g || 'b') || md5(g || 'c'), 'hex')
FROM generate_series(%d::bigint, %d::bigint) g`, t, next, next+batch-1)); err != nil {
				return 0, err
			}
			next += batch
			out, err := pg.SQL(db, fmt.Sprintf("SELECT pg_total_relation_size('%s')", t))
			if err != nil {
				return 0, err
			}
			if n, err = strconv.ParseInt(strings.TrimSpace(out), 10, 64); err != nil {
				return 0, err
			}
			perRow := float64(n) / float64(next-1)
			batch = min(500_000, max(1_000, int64(float64(share-n)/perRow)+1))
		}
		total += n
	}
	if _, err := pg.SQL(db, "VACUUM ANALYZE"); err != nil {
		return 0, err
	}
	return total, nil
}
