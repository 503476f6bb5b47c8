package pitr_test

import (
	"archive/tar"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"cairn.dev/agent/internal/engine"
	"cairn.dev/agent/internal/inventory"
	"cairn.dev/agent/internal/pitr"
	"cairn.dev/agent/internal/store"
	"cairn.dev/agent/internal/testenv"
)

// takeBase takes a physical base of p as the agent's backup does and
// returns its file and the segment it starts in.
func takeBase(t *testing.T, p *pgServer) (string, string) {
	t.Helper()
	f := filepath.Join(t.TempDir(), "base.tar")
	out, err := os.Create(f)
	check(t, err)
	b := &engine.PostgresBase{Conn: p.conn()}
	check(t, b.Dump(context.Background(), out))
	check(t, out.Close())
	label, err := pitr.ParseBackupLabel(b.BackupLabel())
	check(t, err)
	return f, label.File
}

// recoverBase unpacks base and recovers it to until (zero: latest; immediate:
// the base's own consistent point); tamper, when set, changes the unpacked
// data directory first (an archive crafted by whoever can write the store).
func recoverBase(t *testing.T, st store.Store, dir, baseTar, baseFile string, until time.Time, immediate bool, tamper func(dataDir string)) (*pitr.Recovery, error) {
	t.Helper()
	ctx := context.Background()
	rec, err := pitr.PrepareRecovery(ctx, st, dir, baseFile, until, immediate, nil, nil)
	check(t, err)
	t.Cleanup(rec.Close)
	f, err := os.Open(baseTar)
	check(t, err)
	defer f.Close()
	check(t, rec.Unpack(ctx, f))
	if tamper != nil {
		tamper(rec.DataDir)
	}
	rec.User = "postgres"
	self, err := os.Executable() // TestMain answers wal-fetch
	check(t, err)
	return rec, rec.Start(ctx, self)
}

func recoveredSQL(t *testing.T, rec *pitr.Recovery, db, q string) string {
	t.Helper()
	ctx := context.Background()
	c, err := rec.Connect(ctx, rec.Superuser, db)
	check(t, err)
	defer c.Close(ctx)
	var s string
	if err := c.QueryRow(ctx, q).Scan(&s); err != nil {
		t.Fatalf("%s on the recovered server: %v", q, err)
	}
	return s
}

// Hostile source superuser (issue 47, item 2): ALTER SYSTEM plants a
// recovery_end_command, an archive_command with archive_mode on, and
// libraries to load in the base's postgresql.auto.conf; a store writer adds
// an include_dir to its postgresql.conf. The restore succeeds, none of them
// runs or is loaded, no marker appears.
func TestRecoveryRunsNothingOfTheBasesConfiguration(t *testing.T) {
	p := startPG(t, "wal_level=replica", "max_wal_senders=4")
	marks, err := os.MkdirTemp("", "cairn-marks-")
	check(t, err)
	t.Cleanup(func() { os.RemoveAll(marks) })
	check(t, os.Chmod(marks, 0o777))
	p.must(t, "postgres", "CREATE DATABASE shop")
	p.must(t, "shop", "CREATE TABLE orders (id int PRIMARY KEY); INSERT INTO orders VALUES (1), (2)")
	for _, s := range []string{
		"recovery_end_command = 'touch " + marks + "/recovery_end_command'",
		"archive_mode = 'on'",
		"archive_command = 'touch " + marks + "/archive_command'",
		"archive_cleanup_command = 'touch " + marks + "/archive_cleanup_command'",
		"shared_preload_libraries = 'cairn_no_such_library'",
		"session_preload_libraries = 'cairn_no_such_library'",
		"dynamic_library_path = '" + marks + "'",
	} {
		p.must(t, "postgres", "ALTER SYSTEM SET "+s)
	}
	// Per-role settings live in the catalog, applied at connection: a
	// library to load into every session of the restore's own role.
	p.must(t, "postgres", "ALTER ROLE postgres IN DATABASE shop SET session_preload_libraries = 'cairn_no_such_library'")
	base, file := takeBase(t, p)
	p.must(t, "postgres", "ALTER SYSTEM RESET ALL")

	st, err := store.NewPVC(t.TempDir())
	check(t, err)
	rec, err := recoverBase(t, st, "pitr/hostile", base, file, time.Time{}, true, func(dataDir string) {
		auto, err := os.ReadFile(filepath.Join(dataDir, "postgresql.auto.conf"))
		check(t, err)
		if !strings.Contains(string(auto), "recovery_end_command") {
			t.Fatalf("the base's postgresql.auto.conf does not carry the planted setting:\n%s", auto)
		}
		check(t, os.Mkdir(filepath.Join(dataDir, "evil.d"), 0o700))
		check(t, os.WriteFile(filepath.Join(dataDir, "evil.d", "x.conf"), []byte("local_preload_libraries = 'cairn_no_such_library'\n"), 0o600))
		f, err := os.OpenFile(filepath.Join(dataDir, "postgresql.conf"), os.O_APPEND|os.O_WRONLY, 0)
		check(t, err)
		fmt.Fprintln(f, "include_dir 'evil.d'")
		check(t, f.Close())
	})
	if err != nil {
		t.Fatalf("recovering a base with a planted configuration: %v", err)
	}
	if got := recoveredSQL(t, rec, "shop", "SELECT string_agg(id::text, ',' ORDER BY id) FROM orders"); got != "1,2" {
		t.Errorf("recovered rows %q, want 1,2", got)
	}
	// pg_dump of the recovered database, as the restore runs it: the
	// per-role library is not loaded (and is, without the options).
	conn := rec.Conn(rec.Superuser)
	conn.Database = "shop"
	if err := (&engine.Postgres{Conn: conn, Options: pitr.SessionOptions}).Dump(context.Background(), io.Discard); err != nil {
		t.Errorf("pg_dump of the recovered database: %v", err)
	}
	if err := (&engine.Postgres{Conn: conn}).Dump(context.Background(), io.Discard); err == nil || !strings.Contains(err.Error(), "cairn_no_such_library") {
		t.Errorf("pg_dump without the session options: %v, want the planted per-role library refused (the test would prove nothing)", err)
	}
	for _, s := range []string{"recovery_end_command", "archive_command", "archive_cleanup_command", "shared_preload_libraries", "session_preload_libraries", "local_preload_libraries"} {
		// archive_command shows "(disabled)" with archive_mode off.
		if got := recoveredSQL(t, rec, "shop", "SELECT current_setting('"+s+"')"); got != "" && got != "(disabled)" {
			t.Errorf("the temporary server runs with %s = %q", s, got)
		}
	}
	if got := recoveredSQL(t, rec, "shop", "SELECT current_setting('archive_mode')"); got != "off" {
		t.Errorf("the temporary server runs with archive_mode = %q", got)
	}
	rec.Close()
	if entries, err := os.ReadDir(marks); err != nil || len(entries) > 0 {
		t.Errorf("a command of the base's configuration ran: %v (%v)", entries, err)
	}
}

// Issue 47, item 5: a tablespace_map (a store writer's) would make the
// temporary server link pg_tblspc/<oid> to any folder and replay into it:
// a base holding one is refused before the server starts.
func TestRecoveryRefusesATablespaceMap(t *testing.T) {
	p := startPG(t, "wal_level=replica", "max_wal_senders=4")
	base, file := takeBase(t, p)
	outside := t.TempDir()
	st, err := store.NewPVC(t.TempDir())
	check(t, err)
	_, err = recoverBase(t, st, "pitr/tblspc", base, file, time.Time{}, true, func(dataDir string) {
		check(t, os.WriteFile(filepath.Join(dataDir, "tablespace_map"), []byte("16400 "+outside+"\n"), 0o600))
	})
	if err == nil || !strings.Contains(err.Error(), "tablespace_map") {
		t.Errorf("recovering a base with a tablespace_map to %s: %v, want it refused", outside, err)
	}
}

// Issue 46: a source that is a logical-replication subscriber (its commits
// carry a replication origin) with a prepared transaction open at the
// target, recovered to a time: the temporary server's replay settings come
// from the base's pg_control (max_prepared_transactions) and leave room for
// the origins (max_replication_slots), and its subscription never connects
// to the publisher.
func TestRecoveryOfASubscriberWithAPreparedTransaction(t *testing.T) {
	p := startPG(t, "wal_level=logical", "max_replication_slots=10", "max_wal_senders=10",
		"max_prepared_transactions=7", "max_connections=60", "max_worker_processes=12", "max_locks_per_transaction=80")
	p.must(t, "postgres", "CREATE DATABASE pub")
	p.must(t, "postgres", "CREATE DATABASE src")
	p.must(t, "pub", "CREATE TABLE items (id int PRIMARY KEY, note text); CREATE PUBLICATION p FOR TABLE items; SELECT pg_create_logical_replication_slot('cairn_sub', 'pgoutput')")
	p.must(t, "src", "CREATE TABLE items (id int PRIMARY KEY, note text); CREATE TABLE local (id int PRIMARY KEY)")
	p.must(t, "src", fmt.Sprintf("CREATE SUBSCRIPTION s CONNECTION 'host=127.0.0.1 port=%d dbname=pub user=postgres password=''%s''' PUBLICATION p WITH (create_slot = false, slot_name = 'cairn_sub', copy_data = false)", p.port, p.password))
	t.Cleanup(func() {
		p.sql("src", "ALTER SUBSCRIPTION s DISABLE; ALTER SUBSCRIPTION s SET (slot_name = NONE); DROP SUBSCRIPTION s")
	})
	replicated := func(want string) {
		t.Helper()
		check(t, testenv.Poll(60*time.Second, 100*time.Millisecond, func() error {
			got, err := p.sql("src", "SELECT coalesce(string_agg(id::text, ',' ORDER BY id), '') FROM items")
			if err == nil && got != want {
				err = fmt.Errorf("subscriber has items %q, want %q", got, want)
			}
			return err
		}))
	}

	st, err := store.NewPVC(t.TempDir())
	check(t, err)
	const dir = "pitr/subscriber"
	ctx, cancel := context.WithCancel(context.Background())
	started := make(chan struct{})
	arch := &pitr.WALArchiver{Conn: p.conn(), Store: st, Dir: dir, Spool: t.TempDir(), MaxSegmentAge: time.Second, Slot: "cairn_archiver",
		Started: func(string) { close(started) }}
	done := make(chan error, 1)
	go func() { done <- arch.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("archiver: %v", err)
		}
	})
	select {
	case <-started:
	case err := <-done:
		t.Fatalf("archiver: %v", err)
	case <-time.After(60 * time.Second):
		t.Fatal("the archiver did not start within 60s")
	}
	base, file := takeBase(t, p)

	p.must(t, "pub", "INSERT INTO items VALUES (1, 'a'), (2, 'b')")
	replicated("1,2")
	p.must(t, "src", "BEGIN; INSERT INTO local VALUES (1); PREPARE TRANSACTION 'cairn_p1'; COMMIT PREPARED 'cairn_p1'")
	p.must(t, "src", "BEGIN; INSERT INTO local VALUES (2); PREPARE TRANSACTION 'cairn_p2'")
	t.Cleanup(func() { p.sql("src", "ROLLBACK PREPARED 'cairn_p2'") })
	between := time.Now().Truncate(time.Second).Add(time.Second)
	waitPast(t, between)
	p.must(t, "pub", "INSERT INTO items VALUES (3, 'c')")
	replicated("1,2,3")
	p.must(t, "src", "INSERT INTO local VALUES (99)")
	after := time.Now()
	check(t, testenv.Poll(90*time.Second, 200*time.Millisecond, func() error {
		ix, err := pitr.LoadIndex(context.Background(), st, dir)
		if err != nil {
			return err
		}
		if w := ix.WindowFrom(pitr.Base{File: file}); !w.Latest.After(after) {
			return fmt.Errorf("archived to %s, not past %s yet", w.Latest, after)
		}
		return nil
	}))

	rec, err := recoverBase(t, st, dir, base, file, between, false, nil)
	if err != nil {
		t.Fatalf("recovering a subscriber with a prepared transaction to %s: %v", between, err)
	}
	if got := recoveredSQL(t, rec, "src", "SELECT string_agg(id::text, ',' ORDER BY id) FROM items"); got != "1,2" {
		t.Errorf("recovered items %q, want 1,2", got)
	}
	if got := recoveredSQL(t, rec, "src", "SELECT string_agg(id::text, ',' ORDER BY id) FROM local"); got != "1" {
		t.Errorf("recovered local %q, want 1 (the committed prepared transaction; the open one not visible)", got)
	}
	if got := recoveredSQL(t, rec, "src", "SELECT string_agg(gid, ',') FROM pg_prepared_xacts"); got != "cairn_p2" {
		t.Errorf("recovered prepared transactions %q, want cairn_p2", got)
	}
	if got := recoveredSQL(t, rec, "postgres", "SELECT count(*)::text FROM pg_stat_activity WHERE backend_type LIKE 'logical replication%'"); got != "0" {
		t.Errorf("the temporary server runs %s logical replication worker(s): its subscription could reach the publisher", got)
	}
	for setting, least := range map[string]string{"max_prepared_transactions": "7", "max_connections": "60", "max_worker_processes": "12", "max_locks_per_transaction": "80"} {
		if got := recoveredSQL(t, rec, "postgres", "SELECT current_setting('"+setting+"')"); got != least {
			t.Errorf("the temporary server's %s is %s, want the base's %s", setting, got, least)
		}
	}
}

// Issue 47, item 5: a base whose tar holds a link to a folder outside, then
// a file through it, is refused, and nothing is written outside.
func TestUnpackRefusesWritingThroughALink(t *testing.T) {
	for _, tc := range []struct {
		name   string
		target func(dataDir, outside string) string
	}{
		{"absolute", func(_, outside string) string { return outside }},
		{"relative", func(dataDir, outside string) string { rel, _ := filepath.Rel(dataDir, outside); return rel }},
		{"inside", func(string, string) string { return "global" }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			outside := t.TempDir()
			rec, err := pitr.PrepareRecovery(context.Background(), nil, "", "", time.Time{}, true, nil, nil)
			check(t, err)
			rec.Tmp = t.TempDir()
			defer rec.Close()
			target := tc.target(filepath.Join(rec.Tmp, "data"), outside)
			tarball := craftedTar(t, []tarEntry{
				{name: "global/", dir: true},
				{name: "x", link: target},
				{name: "x/file", body: "planted"},
			})
			err = rec.Unpack(context.Background(), strings.NewReader(tarball))
			if err == nil {
				t.Errorf("a tar writing through link x -> %s was unpacked", target)
			}
			if _, serr := os.Stat(filepath.Join(outside, "file")); !errors.Is(serr, fs.ErrNotExist) {
				t.Errorf("the tar's file landed outside the data directory (%v)", serr)
			}
		})
	}
}

type tarEntry struct {
	name, body, link string
	dir              bool
}

func craftedTar(t *testing.T, entries []tarEntry) string {
	t.Helper()
	var b strings.Builder
	tw := tar.NewWriter(&b)
	for _, e := range entries {
		h := &tar.Header{Name: e.name, Mode: 0o600, Typeflag: tar.TypeReg, Size: int64(len(e.body))}
		switch {
		case e.dir:
			h.Typeflag, h.Mode, h.Size = tar.TypeDir, 0o700, 0
		case e.link != "":
			h.Typeflag, h.Linkname, h.Size = tar.TypeSymlink, e.link, 0
		}
		check(t, tw.WriteHeader(h))
		if h.Size > 0 {
			_, err := tw.Write([]byte(e.body))
			check(t, err)
		}
	}
	check(t, tw.Close())
	return b.String()
}

// A base whose roles cannot log in (the bootstrap superuser renamed, the
// base's role gone): the temporary server accepts connections but none of
// the agent's; the recovery says so after pitr.PromoteGrace instead of
// waiting for the Job's deadline.
func TestRecoveryGivesUpWhenNoRoleCanLogIn(t *testing.T) {
	p := startPG(t, "wal_level=replica", "max_wal_senders=4")
	p.must(t, "postgres", "CREATE ROLE cairn_admin SUPERUSER LOGIN REPLICATION PASSWORD 'admin pw'")
	admin := engine.Conn{Host: "127.0.0.1", Port: p.port, User: "cairn_admin", Password: "admin pw"}
	c, err := inventory.ConnectPostgres(context.Background(), admin, "postgres")
	check(t, err)
	_, err = c.Exec(context.Background(), "ALTER ROLE postgres RENAME TO cairn_renamed")
	c.Close(context.Background())
	check(t, err)
	f := filepath.Join(t.TempDir(), "base.tar")
	out, err := os.Create(f)
	check(t, err)
	b := &engine.PostgresBase{Conn: admin}
	check(t, b.Dump(context.Background(), out))
	check(t, out.Close())

	defer func(g time.Duration) { pitr.PromoteGrace = g }(pitr.PromoteGrace)
	pitr.PromoteGrace = 2 * time.Second
	rec, err := pitr.PrepareRecovery(context.Background(), nil, "", "", time.Time{}, true, nil, nil)
	check(t, err)
	t.Cleanup(rec.Close)
	in, err := os.Open(f)
	check(t, err)
	defer in.Close()
	check(t, rec.Unpack(context.Background(), in))
	rec.User = "cairn_gone"
	self, err := os.Executable()
	check(t, err)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	err = rec.Start(ctx, self)
	if err == nil || !strings.Contains(err.Error(), "accepts connections, but none") {
		t.Errorf("recovering a base whose roles cannot log in: %v, want it given up after the grace (not the 2-minute deadline)", err)
	}
}
