package pitr_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"cairn.dev/agent/internal/engine"
	"cairn.dev/agent/internal/pitr"
	"cairn.dev/agent/internal/store"
	"cairn.dev/agent/internal/testenv"
)

var db *testenv.MariaDB

func TestMain(m *testing.M) {
	// The temporary PostgreSQL server's restore_command runs this test
	// binary as the agent: `<binary> wal-fetch <socket> <file> <path>`.
	if len(os.Args) > 1 && os.Args[1] == "wal-fetch" {
		os.Exit(pitr.WALFetch(os.Args[2:], os.Stderr))
	}
	var err error
	if db, err = testenv.StartMariaDBWithBinlog("cairn", "s3cret pw"); err != nil {
		fmt.Fprintln(os.Stderr, "pitr tests need MariaDB:", err)
		os.Exit(1)
	}
	code := m.Run()
	db.Stop()
	os.Exit(code)
}

func sql(t *testing.T, database, q string) string {
	t.Helper()
	out, err := db.SQL(database, q)
	if err != nil {
		t.Fatalf("%s: %v", q, err)
	}
	return strings.TrimSpace(out)
}

// waitPast polls until the clock is past t (binary log times have a
// one-second resolution: a test that needs two changes in different
// seconds waits for the next second to begin).
func waitPast(t *testing.T, at time.Time) {
	t.Helper()
	if err := testenv.Poll(5*time.Second, 20*time.Millisecond, func() error {
		if !time.Now().After(at) {
			return errors.New("not yet")
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
}

// archiver runs an Archiver on st until the test ends (or stop is called).
type archiver struct {
	stop func()
	mu   sync.Mutex
	segs []pitr.Segment
}

func startArchiver(t *testing.T, st store.Store, dir string) *archiver {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	a := &archiver{}
	started := make(chan struct{})
	arch := &pitr.Archiver{
		Source: pitr.Source{Host: "127.0.0.1", Port: db.Port, User: db.User, Password: db.Password},
		Store:  st, Dir: dir, Spool: t.TempDir(), MaxSegmentAge: time.Second, ReaderID: 4242,
		Archived: func(s pitr.Segment) { a.mu.Lock(); a.segs = append(a.segs, s); a.mu.Unlock() },
		Started:  func(string) { close(started) },
	}
	done := make(chan error, 1)
	go func() { done <- arch.Run(ctx) }()
	var once sync.Once
	a.stop = func() {
		once.Do(func() {
			cancel()
			if err := <-done; err != nil {
				t.Errorf("archiver: %v", err)
			}
		})
	}
	t.Cleanup(a.stop)
	select { // a base taken from now on is in an archived file
	case <-started:
	case err := <-done:
		t.Fatalf("archiver: %v", err)
	case <-time.After(30 * time.Second):
		t.Fatal("the archiver did not start reading within 30s")
	}
	return a
}

// archivedPast polls until the archive holds every change before at.
func archivedPast(t *testing.T, st store.Store, dir string, at time.Time) *pitr.Index {
	t.Helper()
	var ix *pitr.Index
	if err := testenv.Poll(30*time.Second, 200*time.Millisecond, func() error {
		var err error
		if ix, err = pitr.LoadIndex(context.Background(), st, dir); err != nil {
			return err
		}
		// The newest segment's last change or the flush that closed it,
		// or the archiver's proof of quiet after it.
		newest, ok := ix.Newest()
		if !ok || ix.WindowFrom(pitr.Base{File: newest.File}).Latest.Before(at) {
			return fmt.Errorf("archive not past %s yet (newest %+v, covered %+v)", at, newest, ix.Covered)
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	return ix
}

// dump takes a base as the agent's backup does with point-in-time on.
func dump(t *testing.T, database string) string {
	t.Helper()
	f := filepath.Join(t.TempDir(), "base.sql")
	out, err := os.Create(f)
	if err != nil {
		t.Fatal(err)
	}
	defer out.Close()
	m := &engine.MySQL{Conn: engine.Conn{Host: "127.0.0.1", Port: db.Port, User: db.User, Password: db.Password, Database: database},
		BinlogPosition: true}
	if err := m.Dump(context.Background(), out); err != nil {
		t.Fatalf("dump: %v", err)
	}
	return f
}

// restoreBase creates database name and loads the dump into it.
func restoreBase(t *testing.T, file, name string) {
	t.Helper()
	sql(t, "", "CREATE DATABASE "+name)
	b, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := db.SQL(name, string(b)); err != nil {
		t.Fatalf("loading the base into %s: %v", name, err)
	}
}

func replay(t *testing.T, st store.Store, dir string, base pitr.Base, until time.Time, from, to string) (time.Time, error) {
	return pitr.Replay(context.Background(), st, dir, base, until,
		pitr.Target{Host: "127.0.0.1", Port: db.Port, User: db.User, Password: db.Password}, from, to, "", "", nil)
}

func TestRestoreToATimeAndToLatest(t *testing.T) {
	st, err := store.NewPVC(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	const dir = "pitr/shop"
	sql(t, "", "CREATE DATABASE shop")
	sql(t, "shop", "CREATE TABLE orders (id INT PRIMARY KEY, note VARCHAR(40) NOT NULL); INSERT INTO orders VALUES (0, 'before the base')")
	a := startArchiver(t, st, dir)
	baseFile := dump(t, "shop")
	f, err := os.Open(baseFile)
	if err != nil {
		t.Fatal(err)
	}
	base, err := pitr.ReadBase(f)
	f.Close()
	if err != nil {
		t.Fatal(err)
	}

	sql(t, "shop", "INSERT INTO orders VALUES (1, 'A')")
	t1 := time.Now()
	waitPast(t, t1.Truncate(time.Second).Add(time.Second))
	// Schema change and a sequence inside the window.
	sql(t, "shop", "ALTER TABLE orders ADD COLUMN qty INT NOT NULL DEFAULT 1; CREATE SEQUENCE order_no START WITH 100")
	sql(t, "shop", "INSERT INTO orders VALUES (2, 'B', NEXT VALUE FOR order_no)")
	t2 := time.Now()
	between := t2.Truncate(time.Second).Add(time.Second)
	waitPast(t, between)
	sql(t, "shop", "DELETE FROM orders WHERE id = 1")
	t3 := time.Now()
	archivedPast(t, st, dir, t3.Truncate(time.Second).Add(time.Second))

	reached, err := func() (time.Time, error) {
		restoreBase(t, baseFile, "shop_between")
		return replay(t, st, dir, base, between, "shop", "shop_between")
	}()
	if err != nil {
		t.Fatalf("restore to %s: %v", between, err)
	}
	if !reached.Equal(between.UTC()) {
		t.Errorf("recovery point reached %s, want %s", reached, between)
	}
	if got := sql(t, "shop_between", "SELECT GROUP_CONCAT(CONCAT(id, ':', note, ':', qty) ORDER BY id) FROM orders"); got != "0:before the base:1,1:A:1,2:B:100" {
		t.Errorf("restored to between t2 and t3: %q, want A and B (with the new column and the sequence's value)", got)
	}
	// A sequence's cached values are not logged (as after a server
	// restart, it continues past its cache): never one given out before.
	if got, _ := strconv.Atoi(sql(t, "shop_between", "SELECT NEXT VALUE FOR order_no")); got <= 100 {
		t.Errorf("the restored sequence gives %d again, after 100 was given", got)
	}

	restoreBase(t, baseFile, "shop_latest")
	if _, err := replay(t, st, dir, base, time.Time{}, "shop", "shop_latest"); err != nil {
		t.Fatalf("restore to latest: %v", err)
	}
	if got := sql(t, "shop_latest", "SELECT GROUP_CONCAT(id ORDER BY id) FROM orders"); got != "0,2" {
		t.Errorf("restored to latest: ids %q, want 0,2 (A deleted, B present)", got)
	}

	// A time after the newest archived change is refused, nothing written.
	restoreBase(t, baseFile, "shop_future")
	_, err = replay(t, st, dir, base, time.Now().Add(time.Hour), "shop", "shop_future")
	if !errors.Is(err, pitr.ErrOutsideWindow) {
		t.Errorf("restore to an hour from now: %v, want it refused as outside the window", err)
	}
	if got := sql(t, "shop_future", "SELECT GROUP_CONCAT(id ORDER BY id) FROM orders"); got != "0" {
		t.Errorf("a refused replay wrote to its target: ids %q", got)
	}

	// The archiver stops and starts again: it resumes where it was, no gap.
	a.stop()
	sql(t, "shop", "INSERT INTO orders VALUES (3, 'C', 7)")
	startArchiver(t, st, dir)
	t4 := time.Now()
	ix := archivedPast(t, st, dir, t4.Truncate(time.Second).Add(time.Second))
	if gaps := ix.Gaps(); len(gaps) > 0 {
		t.Fatalf("after a restart the archive has gaps: %v", gaps)
	}
	restoreBase(t, baseFile, "shop_resumed")
	if _, err := replay(t, st, dir, base, time.Time{}, "shop", "shop_resumed"); err != nil {
		t.Fatalf("restore to latest after the restart: %v", err)
	}
	if got := sql(t, "shop_resumed", "SELECT GROUP_CONCAT(id ORDER BY id) FROM orders"); got != "0,2,3" {
		t.Errorf("restored to latest after a restart: ids %q, want 0,2,3", got)
	}

	// The replays into the source's own server gave their transactions the
	// server's next GTIDs, never the source's old ones: its binary log
	// still decodes in GTID strict mode (a replica in strict mode would
	// stop on an out-of-order GTID).
	logs, _ := filepath.Glob(filepath.Join(db.Dir, "data", "mysql-bin.[0-9]*"))
	if out, err := exec.Command("mariadb-binlog", append([]string{"--no-defaults", "--gtid-strict-mode"}, logs...)...).CombinedOutput(); err != nil {
		t.Errorf("the source's binary log after the replays: %v: %s", err, lastLine(string(out)))
	}

	// A segment deleted by hand: the gap is reported and a restore across
	// it refused, nothing written.
	files := ix.Files()
	var victim string
	for _, f := range files[1 : len(files)-1] {
		if f > base.File {
			victim = f
			break
		}
	}
	if victim == "" {
		t.Fatalf("no segment between the base and the newest to delete: %v", files)
	}
	for _, k := range []string{dir + "/" + victim + ".zst", dir + "/" + victim + ".json"} {
		if err := st.Delete(context.Background(), k); err != nil {
			t.Fatal(err)
		}
	}
	ix, err = pitr.LoadIndex(context.Background(), st, dir)
	if err != nil {
		t.Fatal(err)
	}
	if gaps := ix.Gaps(); len(gaps) != 1 || gaps[0].Missing != victim {
		t.Errorf("gaps after deleting %s: %v", victim, gaps)
	}
	restoreBase(t, baseFile, "shop_gap")
	_, err = replay(t, st, dir, base, time.Time{}, "shop", "shop_gap")
	if err == nil || !strings.Contains(err.Error(), victim) {
		t.Errorf("restore across the deleted %s: %v, want it refused naming the gap", victim, err)
	}
	if got := sql(t, "shop_gap", "SELECT GROUP_CONCAT(id ORDER BY id) FROM orders"); got != "0" {
		t.Errorf("a replay refused for a gap wrote to its target: ids %q", got)
	}
}

func lastLine(s string) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	return lines[len(lines)-1]
}

// Hostile: a statement in the log that names the source database itself
// (`TRUNCATE TABLE hostile . scratch`) is not renamed by --rewrite-db.
// Replayed into a new database on the source's own server it would empty
// the source's live table: the replay is refused before anything is
// applied, and the source keeps its row.
func TestReplayRefusesStatementsNamingTheSource(t *testing.T) {
	st, err := store.NewPVC(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	const dir = "pitr/hostile"
	sql(t, "", "CREATE DATABASE hostile")
	sql(t, "hostile", "CREATE TABLE orders (id INT PRIMARY KEY); INSERT INTO orders VALUES (1)")
	startArchiver(t, st, dir)
	baseFile := dump(t, "hostile")
	f, err := os.Open(baseFile)
	if err != nil {
		t.Fatal(err)
	}
	base, err := pitr.ReadBase(f)
	f.Close()
	if err != nil {
		t.Fatal(err)
	}
	// Logged as typed, with default database hostile, naming it explicitly
	// (the server rewrites a DROP TABLE unqualified, not a TRUNCATE).
	sql(t, "hostile", "CREATE TABLE scratch (v INT); INSERT INTO scratch VALUES (7); TRUNCATE TABLE hostile . scratch; INSERT INTO scratch VALUES (42)")
	archivedPast(t, st, dir, time.Now().Truncate(time.Second).Add(time.Second))

	restoreBase(t, baseFile, "hostile_copy")
	_, err = replay(t, st, dir, base, time.Time{}, "hostile", "hostile_copy")
	if !errors.Is(err, pitr.ErrNamesSource) {
		t.Errorf("replaying a log that truncates hostile.scratch into hostile_copy: %v, want it refused", err)
	}
	if got := sql(t, "hostile", "SELECT v FROM scratch"); got != "42" {
		t.Fatalf("the source's table after the refused replay: %q, want its row 42", got)
	}
	if got := sql(t, "hostile_copy", "SELECT COUNT(*) FROM information_schema.tables WHERE table_schema = 'hostile_copy' AND table_name = 'scratch'"); got != "0" {
		t.Errorf("a refused replay applied statements to its target (%s scratch table)", got)
	}
}

// Issue 47, item 4: the binary log filter keeps statements by their
// default database, so `USE src; TRUNCATE other.t` and a GRANT or CREATE
// USER typed with src as default database are in the replay's stream. A
// restore into a new database beside the source refuses them, naming the
// event, before the target is touched: the live other schema keeps its
// rows, no user is created.
func TestReplayAppliesOnlyTheSourcesOwnChanges(t *testing.T) {
	for _, tc := range []struct {
		name, window, after, want string
		intact                    func(t *testing.T)
	}{
		{name: "truncate other schema", window: "INSERT INTO orders VALUES (2); TRUNCATE xs_other.t",
			// The other schema lives on after the truncate.
			after: "INSERT INTO t SELECT seq FROM seq_1_to_300", want: "TRUNCATE xs_other.t",
			intact: func(t *testing.T) {
				if got := sql(t, "", "SELECT COUNT(*) FROM xs_other.t"); got != "300" {
					t.Errorf("the live xs_other.t after the refused replay has %s rows, want its 300", got)
				}
			}},
		{name: "users and grants", window: "INSERT INTO orders VALUES (2); CREATE USER 'cairn_evil'@'%' IDENTIFIED BY 'x'; GRANT ALL ON *.* TO 'cairn_evil'@'%'",
			after: "DROP USER 'cairn_evil'@'%'", want: "CREATE USER",
			intact: func(t *testing.T) {
				if got := sql(t, "", "SELECT COUNT(*) FROM mysql.user WHERE user = 'cairn_evil'"); got != "0" {
					t.Errorf("the refused replay created user cairn_evil (%s)", got)
				}
			}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			st, err := store.NewPVC(t.TempDir())
			if err != nil {
				t.Fatal(err)
			}
			const dir = "pitr/xs"
			for _, d := range []string{"xs_src", "xs_other", "xs_copy"} {
				sql(t, "", "DROP DATABASE IF EXISTS "+d)
			}
			sql(t, "", "CREATE DATABASE xs_src; CREATE DATABASE xs_other")
			sql(t, "xs_src", "CREATE TABLE orders (id INT PRIMARY KEY); INSERT INTO orders VALUES (1)")
			sql(t, "xs_other", "CREATE TABLE t (id INT PRIMARY KEY); INSERT INTO t SELECT seq FROM seq_1_to_300")
			a := startArchiver(t, st, dir)
			defer a.stop()
			baseFile := dump(t, "xs_src")
			f, err := os.Open(baseFile)
			if err != nil {
				t.Fatal(err)
			}
			base, err := pitr.ReadBase(f)
			f.Close()
			if err != nil {
				t.Fatal(err)
			}
			sql(t, "xs_src", tc.window)
			sql(t, "xs_other", tc.after) // logged with another default database: not in the replay
			archivedPast(t, st, dir, time.Now().Truncate(time.Second).Add(time.Second))

			restoreBase(t, baseFile, "xs_copy")
			_, err = replay(t, st, dir, base, time.Time{}, "xs_src", "xs_copy")
			t.Logf("replay: %v", err)
			if !errors.Is(err, pitr.ErrOutsideSource) || !strings.Contains(err.Error(), tc.want) || !strings.Contains(err.Error(), "GTID") {
				t.Errorf("replaying a log with %q into xs_copy: %v, want it refused naming the event (GTID) and %q", tc.window, err, tc.want)
			}
			tc.intact(t)
			if got := sql(t, "xs_copy", "SELECT GROUP_CONCAT(id ORDER BY id) FROM orders"); got != "1" {
				t.Errorf("a refused replay wrote to its target: ids %q, want the base's 1", got)
			}
		})
	}
}
