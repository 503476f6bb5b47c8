package suite

import (
	"strconv"
	"strings"
	"testing"
	"time"

	"cairn.dev/agent/internal/testenv"
)

// MigrateParallelConsistent (MySQL/MariaDB): while a writer commits
// transactions that each insert one row, with the same id, into each of
// pair_1 … pair_4, a parallel copy (tables on four connections of their
// own, so the pair tables are read on at least two) must land a target
// where the four tables hold exactly the same ids — every connection read
// the same point in time — and that point lies inside the copy. (Without
// the global read lock lining the snapshots up, this fails: seen with the
// lock removed, e.g. 51282 rows in one table and 51274 in another.)
func MigrateParallelConsistent(t *testing.T, e *Env) {
	m := newMigration(t, e, "mig_par", "CAIRN_MIGRATE_PARALLEL=4")
	ctl := "mig_par_ctl"
	check(t, e.DB.Drop(ctl))
	check(t, e.DB.Create(ctl))
	t.Cleanup(func() { e.DB.Drop(ctl) })
	check(t, e.DB.SeedBig(m.src, 8))
	_, err := e.DB.SQL(m.src, `
CREATE TABLE pair_1 (id INT AUTO_INCREMENT PRIMARY KEY, v INT NOT NULL, pad VARCHAR(200)) ENGINE=InnoDB;
CREATE TABLE pair_2 (id INT PRIMARY KEY, v INT NOT NULL, pad VARCHAR(200)) ENGINE=InnoDB;
CREATE TABLE pair_3 LIKE pair_2;
CREATE TABLE pair_4 LIKE pair_2;
INSERT INTO pair_1 (id, v, pad) SELECT seq, seq, REPEAT('a', 150) FROM seq_1_to_20000;
INSERT INTO pair_2 SELECT * FROM pair_1;
INSERT INTO pair_3 SELECT * FROM pair_1;
INSERT INTO pair_4 SELECT * FROM pair_1;
ANALYZE TABLE blobs, customers, orders, audit, pair_1, pair_2, pair_3, pair_4;`)
	check(t, err)
	_, err = e.DB.SQL(ctl, `
CREATE TABLE stop (x INT);
DELIMITER ;;
CREATE PROCEDURE writer()
BEGIN
  DECLARE i INT DEFAULT 0;
  WHILE (SELECT COUNT(*) FROM stop) = 0 DO
    SET i = i + 1;
    START TRANSACTION;
    INSERT INTO mig_par_src.pair_1 (v, pad) VALUES (i, 'w');
    INSERT INTO mig_par_src.pair_2 (id, v, pad) VALUES (LAST_INSERT_ID(), i, 'w');
    INSERT INTO mig_par_src.pair_3 (id, v, pad) VALUES (LAST_INSERT_ID(), i, 'w');
    INSERT INTO mig_par_src.pair_4 (id, v, pad) VALUES (LAST_INSERT_ID(), i, 'w');
    COMMIT;
  END WHILE;
END;;
DELIMITER ;`)
	check(t, err)
	count := func(db string) int {
		t.Helper()
		out, err := e.DB.SQL(db, "SELECT COUNT(*) FROM pair_1")
		check(t, err)
		n, _ := parseInt(out)
		return n
	}
	writerDone := make(chan error, 1)
	go func() {
		_, err := e.DB.SQL(ctl, "CALL writer()")
		writerDone <- err
	}()
	stopWriter := func() {
		if _, err := e.DB.SQL(ctl, "INSERT INTO stop VALUES (1)"); err != nil {
			t.Errorf("stop the writer: %v", err)
		}
		if err := <-writerDone; err != nil {
			t.Errorf("writer: %v", err)
		}
	}
	// The writer is committing before the copy starts.
	base := count(m.src)
	if err := testenv.Poll(time.Minute, 20*time.Millisecond, func() error {
		if count(m.src) < base+100 {
			return errorf("writer has not written yet")
		}
		return nil
	}); err != nil {
		stopWriter()
		t.Fatal(err)
	}
	before := count(m.src)
	cp := m.run(t, "copy")
	after := count(m.src)
	stopWriter()
	if cp.Code != 0 {
		t.Fatalf("copy: exit %d", cp.Code)
	}
	if !strings.Contains(cp.TermLog, "rows copied on 4 connections in one snapshot") {
		t.Errorf("copy did not report 4 snapshot connections: %s", cp.TermLog)
	}
	if after <= before {
		t.Fatalf("no write committed during the copy (%d rows before, %d after): the test proves nothing", before, after)
	}
	got, err := e.DB.SQL(m.dst, `SELECT (SELECT COUNT(*) FROM pair_1), (SELECT COUNT(*) FROM pair_2),
  (SELECT COUNT(*) FROM pair_3), (SELECT COUNT(*) FROM pair_4),
  (SELECT COUNT(*) FROM pair_1 a JOIN pair_2 b USING (id, v) JOIN pair_3 c USING (id, v) JOIN pair_4 d USING (id, v))`)
	check(t, err)
	f := strings.Fields(got)
	if len(f) != 5 || f[0] != f[1] || f[0] != f[2] || f[0] != f[3] || f[0] != f[4] {
		t.Fatalf("target rows of pair_1 … pair_4, and ids in all four = %q: the tables were read at different points in time", got)
	}
	n, _ := parseInt(f[0])
	if n < before || n > after {
		t.Errorf("target has %d pairs, the source had %d when the copy started and %d when it ended", n, before, after)
	}
	t.Logf("source pairs: %d at start, %d at end; target: %d", before, after, n)
	// The rest of the source was still (no writes): it matches by the
	// inventory checksum.
	m.ok(t, "copy") // the writer has stopped: now source and target are equal
	allMatch(t, m.verified(t), seedTables(e)+5)
}

// MigrateNoReloadFallsBack (MySQL/MariaDB): a source user without RELOAD
// cannot take FLUSH TABLES WITH READ LOCK; the copy goes on with one
// connection, says so in its actions, and the target verifies equal.
func MigrateNoReloadFallsBack(t *testing.T, e *Env) {
	const user, pw = "cairn_noreload", "NoReload-pw-5d1e"
	_, err := e.DB.SQL("", "DROP USER IF EXISTS '"+user+"'@'127.0.0.1'; CREATE USER '"+user+"'@'127.0.0.1' IDENTIFIED BY '"+pw+"';"+
		"GRANT ALL PRIVILEGES ON *.* TO '"+user+"'@'127.0.0.1'; REVOKE RELOAD ON *.* FROM '"+user+"'@'127.0.0.1';")
	check(t, err)
	t.Cleanup(func() { e.DB.SQL("", "DROP USER IF EXISTS '"+user+"'@'127.0.0.1'") })
	m := newMigration(t, e, "mig_norel", "CAIRN_DB_USER="+user, "CAIRN_DB_PASSWORD="+pw, "CAIRN_MIGRATE_PARALLEL=4")
	r := m.run(t, "copy")
	noSecrets(t, r, pw)
	cp := m.ok(t, "copy")
	if !strings.Contains(strings.Join(cp.Actions, "\n"), "rows copied on one connection") || cp.TablesDone != seedTables(e) {
		t.Errorf("copy without RELOAD: %+v", cp)
	}
	allMatch(t, m.verified(t), seedTables(e))
	if src, dst := fingerprint(t, e.DB, m.src), fingerprint(t, e.DB, m.dst); src != dst {
		t.Fatalf("target differs from source:\n%s\nsource:\n%s", dst, src)
	}
}

// MigrateLargeObjects (PostgreSQL): large objects (one over the copy's
// chunk size, a small one, an empty one) reach the target with their OIDs
// and contents, by the whole-database copy and by a copy of selected
// tables (pg_dump -b); verify counts and checksums them, and finds a
// changed one.
func MigrateLargeObjects(t *testing.T, e *Env) {
	m := newMigration(t, e, "mig_lo")
	_, err := e.DB.SQL(m.src, `
CREATE TABLE docs (id int PRIMARY KEY, doc oid);
INSERT INTO docs VALUES
  (1, lo_from_bytea(0, decode(repeat(md5('x'), 100000), 'hex'))),
  (2, lo_from_bytea(0, convert_to('small large object', 'UTF8'))),
  (3, lo_create(0));`)
	check(t, err)
	loPrint := func(db string) string {
		t.Helper()
		out, err := e.DB.SQL(db, "SELECT count(*), coalesce(sum(length(lo_get(oid))), 0), md5(string_agg(oid::text || ':' || md5(lo_get(oid)), ',' ORDER BY oid)) FROM pg_largeobject_metadata")
		check(t, err)
		return out
	}
	want := loPrint(m.src)
	if !strings.HasPrefix(want, "3") {
		t.Fatalf("source large objects: %s", want)
	}
	cp := m.ok(t, "copy")
	if got := loPrint(m.dst); got != want {
		t.Fatalf("target large objects %q, source %q (copy: %+v)", got, want, cp)
	}
	v := m.verified(t)
	allMatch(t, v, seedTables(e)+2) // docs and pg_catalog.pg_largeobject
	lo := v.Items[0]
	for _, c := range v.Items {
		if c.Table == "pg_catalog.pg_largeobject" {
			lo = c
		}
	}
	if lo.Table != "pg_catalog.pg_largeobject" || lo.SourceRows != 3 || lo.TargetRows != 3 {
		t.Errorf("large objects in the verification: %+v", v.Items)
	}
	// A changed byte is found by Checksum (not by RowCount).
	_, err = e.DB.SQL(m.dst, "SELECT lo_put(min(oid), 5, '\\x00') FROM pg_largeobject_metadata")
	check(t, err)
	v = m.verified(t)
	if v.Mismatched != 1 || v.Items[0].Table != "pg_catalog.pg_largeobject" || v.Items[0].Reason != "content differs" {
		t.Errorf("verify after a changed large object: %+v", v)
	}
	// A repeated copy replaces them.
	m.ok(t, "copy")
	if got := loPrint(m.dst); got != want {
		t.Fatalf("after a second copy, target large objects %q, source %q", got, want)
	}
	// A copy of selected tables carries them too.
	check(t, e.DB.Drop(m.dst))
	m.ok(t, "copy", "CAIRN_MIGRATE_INCLUDE=public.docs")
	if got := loPrint(m.dst); got != want {
		t.Fatalf("copy of public.docs: target large objects %q, source %q", got, want)
	}
	allMatch(t, m.verified(t, "CAIRN_MIGRATE_INCLUDE=public.docs"), 2)
}

func parseInt(s string) (int, error) { return strconv.Atoi(strings.TrimSpace(s)) }
