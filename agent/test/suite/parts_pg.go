package suite

import (
	"bytes"
	"os"
	"path"
	"slices"
	"strings"
	"testing"

	"github.com/klauspost/compress/zstd"

	"cairn.dev/agent/contract"
	"cairn.dev/agent/internal/naming"
	"cairn.dev/agent/internal/parts"
)

// pgPartsSQL adds, to the Seed and SeedBig tables, two tables whose
// foreign key runs against the order --clean drops tables in (a_child
// references b_parent: the reverse of the archive's order drops b_parent
// first), a second index, a view, and a trigger on the big table that
// records every row inserted into it (one, at the source): a restore that
// created it before the table's rows were in would record them all; and
// the same on a partitioned table whose larger partition has a part of its
// own (the trigger is the parent's, cloned onto each partition); and two
// large tables whose schema and name joined by a dot are the same
// ("x"."y.z", "x.y"."z"): each part must empty and fill its own.
const pgPartsSQL = `
CREATE TABLE b_parent (id int PRIMARY KEY, name text NOT NULL);
CREATE TABLE a_child (id int PRIMARY KEY, parent int NOT NULL REFERENCES b_parent (id), note text);
INSERT INTO b_parent SELECT i, 'parent ' || i FROM generate_series(1, 300) AS i;
INSERT INTO a_child SELECT i, 1 + i % 300, E'tab\there, newline\nthere, backslash \\ ' || i FROM generate_series(1, 3000) AS i;
CREATE INDEX a_child_note ON a_child (note);
CREATE VIEW parents_with_children AS SELECT p.id, count(*) AS children FROM b_parent p JOIN a_child c ON c.parent = p.id GROUP BY p.id;
CREATE TABLE blobs_audit (id int);
CREATE FUNCTION blobs_audit() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN INSERT INTO blobs_audit VALUES (NEW.id); RETURN NEW; END $$;
CREATE TRIGGER blobs_audit AFTER INSERT ON blobs FOR EACH ROW EXECUTE FUNCTION blobs_audit();
INSERT INTO blobs SELECT -1, 'after the trigger';
CREATE TABLE events (id int, at date NOT NULL, body text) PARTITION BY RANGE (at);
CREATE TABLE events_old PARTITION OF events FOR VALUES FROM ('2000-01-01') TO ('2020-01-01');
CREATE TABLE events_new PARTITION OF events FOR VALUES FROM ('2020-01-01') TO ('2100-01-01');
INSERT INTO events SELECT i, DATE '2021-01-01' + i % 1000, repeat(md5(i::text), 8) FROM generate_series(1, 6000) AS i;
INSERT INTO events VALUES (0, '2001-01-01', 'old');
CREATE INDEX events_at ON events (at);
CREATE TABLE events_audit (id int);
CREATE FUNCTION events_audit() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN INSERT INTO public.events_audit VALUES (NEW.id); RETURN NEW; END $$;
CREATE TRIGGER events_audit AFTER INSERT ON events FOR EACH ROW EXECUTE FUNCTION events_audit();
INSERT INTO events VALUES (-1, '2030-01-01', 'after the trigger');
CREATE SCHEMA "x"; CREATE SCHEMA "x.y";
CREATE TABLE "x"."y.z" (id int PRIMARY KEY, body text);
CREATE TABLE "x.y"."z" (id int PRIMARY KEY, body text);
INSERT INTO "x"."y.z" SELECT i, repeat(md5(i::text), 8) FROM generate_series(1, 4500) AS i;
INSERT INTO "x.y"."z" SELECT i, repeat(md5((-i)::text), 8) FROM generate_series(1, 6000) AS i;
CREATE TABLE "x"."evil""
\! touch /tmp/cairn-pg-parts-pwned
" (id int PRIMARY KEY, body text);
INSERT INTO "x"."evil""
\! touch /tmp/cairn-pg-parts-pwned
" SELECT i, repeat(md5((i * 7)::text), 8) FROM generate_series(1, 4200) AS i;
`

// pgEvil is a large table whose name would run a shell command if any
// script the restore feeds psql let it out of its quotes.
const pgEvil = "\"x\".\"evil\"\"\n\\! touch /tmp/cairn-pg-parts-pwned\n\""

// pgPartsPrint is what a PostgreSQL parts restore must reproduce: the
// Seed fingerprint, the big table, the added tables, view and indexes.
func pgPartsPrint(t *testing.T, e *Env, db string) string {
	t.Helper()
	out, err := e.DB.SQL(db, `
SELECT * FROM (
SELECT 'blobs', count(*), md5(coalesce(string_agg(md5(data), '' ORDER BY id), '')) FROM blobs
UNION ALL SELECT 'a_child', count(*), md5(coalesce(string_agg(c::text, E'\n' ORDER BY id), '')) FROM a_child c
UNION ALL SELECT 'b_parent', count(*), md5(coalesce(string_agg(p::text, E'\n' ORDER BY id), '')) FROM b_parent p
UNION ALL SELECT 'view', count(*), sum(children)::text FROM parents_with_children
UNION ALL SELECT 'audit (the trigger fired once, at the source)', count(*), min(id)::text FROM blobs_audit
UNION ALL SELECT 'triggers', count(*), string_agg(tgname, ',' ORDER BY tgname) FROM pg_trigger WHERE NOT tgisinternal
UNION ALL SELECT 'events', count(*), md5(string_agg(e::text, E'\n' ORDER BY id)) FROM events e
UNION ALL SELECT 'x.y.z', count(*), md5(string_agg(t::text, E'\n' ORDER BY id)) FROM "x"."y.z" t
UNION ALL SELECT 'x.y.z again', count(*), md5(string_agg(t::text, E'\n' ORDER BY id)) FROM "x.y"."z" t
UNION ALL SELECT 'evil', count(*), md5(string_agg(t::text, E'\n' ORDER BY id)) FROM "x"."evil""
\! touch /tmp/cairn-pg-parts-pwned
" t
UNION ALL SELECT 'events audit (the trigger fired once, at the source)', count(*), min(id)::text FROM events_audit
UNION ALL SELECT 'indexes', count(*), string_agg(indexname, ',' ORDER BY indexname) FROM pg_indexes WHERE schemaname = 'public'
UNION ALL SELECT 'foreign keys', count(*), string_agg(conname, ',' ORDER BY conname) FROM pg_constraint WHERE contype = 'f'
) AS print ORDER BY 1`)
	check(t, err)
	return fingerprint(t, e.DB, db) + out
}

func pgExists(t *testing.T, e *Env, db string) bool {
	t.Helper()
	out, err := e.DB.SQL("postgres", "SELECT count(*) FROM pg_database WHERE datname = '"+db+"'")
	check(t, err)
	return strings.TrimSpace(out) == "1"
}

// pgPartsBackup seeds db and backs it up in parts (1 MiB: the big table
// gets a part of its own).
func pgPartsBackup(t *testing.T, e *Env, st *Store, db string, job naming.Job, extra ...string) (*contract.Result, *parts.Index) {
	t.Helper()
	check(t, e.DB.Seed(db))
	check(t, e.DB.SeedBig(db, 3))
	_, err := e.DB.SQL(db, pgPartsSQL)
	check(t, err)
	os.Remove("/tmp/cairn-pg-parts-pwned")
	t.Cleanup(func() {
		if _, err := os.Stat("/tmp/cairn-pg-parts-pwned"); err == nil {
			t.Error("a table's name ran a shell command")
		}
	})
	res := mustSucceed(t, e.agent(t, st, db, job, append(slices.Clone(partsEnv), extra...), "backup"))
	key := st.KeyOf(t, job, res.Artifact)
	if !strings.HasSuffix(strings.TrimSuffix(key, naming.ExtEncrypted), naming.ExtPostgresParts) {
		t.Fatalf("artifact %s is not a PostgreSQL multi-part artifact", key)
	}
	x, err := parts.Decode(st.Read(t, key))
	check(t, err)
	var own, rest int
	for _, p := range x.Data() {
		switch p.Table {
		case `"public"."blobs"`, `"public"."events_new"`, `"x"."y.z"`, `"x.y"."z"`, pgEvil:
			own++
		case "":
			rest++
		}
	}
	if x.Engine != "postgres" || len(x.Schema()) != 1 || len(x.Post()) != 1 || own != 5 || rest != 1 || res.Parts != len(x.Parts) {
		t.Fatalf("parts index: engine %s, %d schema, %d post, data parts %+v; result says %d parts", x.Engine, len(x.Schema()), len(x.Post()), x.Data(), res.Parts)
	}
	return res, x
}

// PGPartsRoundTrip: a PostgreSQL backup with CAIRN_PARALLELISM=3 is a
// multi-part artifact (the schema, the big table's rows, everything
// else's, the indexes and constraints), dumped in one snapshot; its
// restore into a new database loads the data parts at once and builds the
// indexes with pg_restore --jobs, and gives the same database; restored
// again over that (changed) database, it runs in one transaction and gives
// the same database again (foreign keys in the way of --clean included).
// In S3 the backup is encrypted.
func PGPartsRoundTrip(t *testing.T, e *Env, kind string) {
	st := e.NewStore(t, kind)
	db := "pgparts_" + kind
	job := naming.Job{Namespace: "shop", Name: "pgparts-" + kind}
	t.Cleanup(func() { e.DB.Drop(db); e.DB.Drop(db + "_t") })
	// In S3, encrypted: every part an age stream of its own.
	var backupEnv, restore []string
	encrypted := kind == "s3"
	if encrypted {
		pub, priv := keyPair(t)
		backupEnv = []string{contract.EnvEncryptionRecipients + "=" + pub}
		restore = []string{contract.EnvEncryptionIdentity + "=" + priv}
	}
	res, x := pgPartsBackup(t, e, st, db, job, backupEnv...)
	before := pgPartsPrint(t, e, db)
	for _, p := range x.Parts {
		b := st.Read(t, job.PartKey(path.Base(res.Artifact), p.Name))
		if encrypted != bytes.HasPrefix(b, []byte("age-encryption.org/v1\n")) || x.Encrypted != encrypted {
			t.Fatalf("part %s: encrypted %v, want %v", p.Name, !encrypted, encrypted)
		}
		if encrypted {
			continue
		}
		d, err := zstd.NewReader(bytes.NewReader(b))
		check(t, err)
		head := make([]byte, 5)
		_, err = d.Read(head)
		d.Close()
		check(t, err)
		if string(head) != "PGDMP" {
			t.Fatalf("part %s is not a pg_dump archive", p.Name)
		}
	}
	check(t, e.DB.Mutate(db)) // after the backup: not in it

	restore = append(restore, contract.EnvChecks+`=[{"name":"rows","rowCountsMatchBackup":true}]`)
	// Parallelism 1 loads the other tables' part (and runs its builds)
	// before the large tables' parts, one by one: a trigger on the
	// partitioned table built then would fire on the rows of its larger
	// partition. Parallelism 3 loads every part at once.
	for _, par := range []string{"1", "3"} {
		r := e.agent(t, st, db+"_t", job, append(slices.Clone(restore), contract.EnvParallelism+"="+par), "restore")
		got := mustSucceed(t, r)
		if !strings.Contains(r.Stderr, "restoring parts into the new database") || !got.TargetCreated {
			t.Errorf("restore into a new database did not load in parallel: %s", r.Stderr)
		}
		checksPassed(t, got)
		if after := pgPartsPrint(t, e, db+"_t"); after != before {
			t.Fatalf("parallelism %s: restore differs.\nbefore:\n%s\nafter:\n%s", par, before, after)
		}
		if par == "1" {
			check(t, e.DB.Drop(db+"_t"))
		}
	}
	restore = append(restore, contract.EnvParallelism+"=3")

	check(t, e.DB.Mutate(db+"_t"))
	_, err := e.DB.SQL(db+"_t", "DELETE FROM a_child WHERE id < 100; CREATE TABLE not_in_backup (id int)")
	check(t, err)
	r := e.agent(t, st, db+"_t", job, restore, "restore")
	got := mustSucceed(t, r)
	if !strings.Contains(r.Stderr, "in one transaction") || got.TargetCreated {
		t.Errorf("restore over an existing database did not run in one transaction: %s", r.Stderr)
	}
	checksPassed(t, got)
	if after := pgPartsPrint(t, e, db+"_t"); after != before {
		t.Fatalf("restore over the existing database differs.\nbefore:\n%s\nafter:\n%s", before, after)
	}
	if out, err := e.DB.SQL(db+"_t", "SELECT count(*) FROM not_in_backup"); err != nil || strings.TrimSpace(out) != "0" {
		t.Errorf("a table not in the backup was touched: %q %v", out, err)
	}
}

func checksPassed(t *testing.T, r *contract.Result) {
	t.Helper()
	if len(r.Checks) == 0 {
		t.Fatal("no check ran")
	}
	for _, c := range r.Checks {
		if !c.Passed {
			t.Errorf("check %s failed: %s", c.Name, c.Message)
		}
	}
}

// PGPartsFailures: a data part that fails — one byte flipped (checksum),
// or a valid part the server refuses (a bad value: one worker failing
// after it sent rows) — fails the restore; into a new database, the
// database the restore created is dropped (nothing half-restored is left);
// over an existing database, nothing of it changed (one transaction).
func PGPartsFailures(t *testing.T, e *Env) {
	st := e.NewStore(t, "pvc")
	db := "pgpartsfail"
	job := naming.Job{Namespace: "shop", Name: "pgpartsfail"}
	t.Cleanup(func() { e.DB.Drop(db); e.DB.Drop(db + "_t") })
	res, x := pgPartsBackup(t, e, st, db, job)
	name := path.Base(res.Artifact)
	i := slices.IndexFunc(x.Parts, func(p parts.Part) bool { return p.Table == `"public"."blobs"` })
	key := job.PartKey(name, x.Parts[i].Name)
	good := st.Read(t, key)
	d, err := zstd.NewReader(bytes.NewReader(good))
	check(t, err)
	archive, err := d.DecodeAll(good, nil)
	check(t, err)
	d.Close()
	// The second row's id made a word: COPY fails on it, after the first
	// row was sent.
	first := bytes.Index(archive, []byte("\t\\\\x"))
	second := bytes.Index(archive[first+1:], []byte("\t\\\\x"))
	if first < 0 || second < 0 {
		t.Fatalf("no two rows in the blobs part: %q", archive[:min(len(archive), 2000)])
	}
	// The id's digits before the tab (each row is a chunk of its own in
	// the archive: a length comes before it, not a newline).
	row := first + 1 + second
	for row > 0 && archive[row-1] >= '0' && archive[row-1] <= '9' {
		row--
	}
	bad := bytes.Clone(archive)
	bad[row] = 'x'
	restore := []string{contract.EnvParallelism + "=3"}

	// An existing target, restored whole first.
	mustSucceed(t, e.agent(t, st, db+"_t", job, restore, "restore"))
	check(t, e.DB.Mutate(db+"_t"))
	existing := pgPartsPrint(t, e, db+"_t")

	for _, tc := range []struct {
		what   string
		apply  func()
		reason string
		exit   int
	}{
		{"flipped byte", func() {
			flipped := bytes.Clone(good)
			flipped[len(flipped)/2] ^= 0x40
			st.Write(t, key, flipped)
		}, "corrupted", contract.ExitCorrupted},
		{"bad value", func() { rewritePart(t, st, job, res, x, i, bad) }, "invalid input syntax", contract.ExitFailure},
	} {
		tc.apply()
		r := e.agent(t, st, db+"_new", job, restore, "restore")
		mustFail(t, r, tc.reason, x.Parts[i].Name, "was dropped")
		mustExit(t, r, tc.exit)
		if pgExists(t, e, db+"_new") {
			t.Errorf("%s: the database the failed restore created is still there", tc.what)
			e.DB.Drop(db + "_new")
		}
		r = e.agent(t, st, db+"_t", job, restore, "restore")
		mustFail(t, r, tc.reason, "rolled back")
		mustExit(t, r, tc.exit)
		if after := pgPartsPrint(t, e, db+"_t"); after != existing {
			t.Errorf("%s: the failed restore changed the existing database.\nbefore:\n%s\nafter:\n%s", tc.what, existing, after)
		}
	}
}
