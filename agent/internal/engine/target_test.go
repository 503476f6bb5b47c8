package engine_test

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	_ "github.com/go-sql-driver/mysql"
	"github.com/jackc/pgx/v5"

	"cairn.dev/agent/internal/engine"
	"cairn.dev/agent/internal/testenv"
)

// targetServer is one real server and how the test reaches it.
type targetServer struct {
	engine string
	conn   engine.Conn
	sql    func(db, sql string) (string, error)
	exists string // SQL (in db "" / "postgres") counting a database named %s
	admin  string // the database the sql func uses for server-wide statements
}

// TestTargetAgainstRealServers runs CreateTarget and DropTarget against a
// real PostgreSQL and MariaDB: created only when missing, the marker
// recognised (PostgreSQL), and a database the restore did not create never
// dropped. (The checks' queries are tested in package checks.)
func TestTargetAgainstRealServers(t *testing.T) {
	os.Setenv("PATH", testenv.PGBinDir+":"+os.Getenv("PATH"))
	const pw = "pw-target-test-1234"
	pg, err := testenv.StartPostgres(pw)
	if err != nil {
		t.Fatalf("PostgreSQL: %v", err)
	}
	t.Cleanup(pg.Stop)
	my, err := testenv.StartMariaDB("cairn", pw)
	if err != nil {
		t.Fatalf("MariaDB: %v", err)
	}
	t.Cleanup(my.Stop)
	servers := []targetServer{
		{engine: "postgres", conn: engine.Conn{Host: "127.0.0.1", Port: pg.Port, User: pg.User, Password: pw}, sql: pg.SQL, admin: "postgres",
			exists: "SELECT count(*) FROM pg_database WHERE datname = '%s'"},
		{engine: "mysql", conn: engine.Conn{Host: "127.0.0.1", Port: my.Port, User: "cairn", Password: pw}, sql: my.SQL, admin: "",
			exists: "SELECT COUNT(*) FROM information_schema.SCHEMATA WHERE SCHEMA_NAME = '%s'"},
	}
	for _, s := range servers {
		t.Run(s.engine, func(t *testing.T) {
			ctx := context.Background()
			target := func(db string) engine.Target {
				c := s.conn
				c.Database = db
				e, err := engine.New(s.engine, c)
				if err != nil {
					t.Fatal(err)
				}
				return e.(engine.Target)
			}
			has := func(db string) bool {
				out, err := s.sql(s.admin, strings.ReplaceAll(s.exists, "%s", db))
				if err != nil {
					t.Fatal(err)
				}
				return strings.TrimSpace(out) == "1"
			}
			marker := "cairn-agent: scratch for shop/orders"

			// Missing: created, own.
			tg := target("scratch_one")
			own, err := tg.CreateTarget(ctx, marker)
			if err != nil || !own || !has("scratch_one") {
				t.Fatalf("CreateTarget of a missing database: own=%v err=%v exists=%v", own, err, has("scratch_one"))
			}
			// Existing again: own only through the marker (PostgreSQL).
			own, err = tg.CreateTarget(ctx, marker)
			if err != nil || own != (s.engine == "postgres") {
				t.Errorf("CreateTarget of the marked database again: own=%v err=%v", own, err)
			}
			if err := tg.DropTarget(ctx, marker, true); err != nil || has("scratch_one") {
				t.Errorf("DropTarget of the restore's own database: %v, exists=%v", err, has("scratch_one"))
			}

			// A database that existed (unmarked) is never dropped.
			if _, err := s.sql(s.admin, "CREATE DATABASE keep_me"); err != nil {
				t.Fatal(err)
			}
			tg = target("keep_me")
			if own, err := tg.CreateTarget(ctx, marker); err != nil || own {
				t.Errorf("CreateTarget of an existing database: own=%v err=%v", own, err)
			}
			if err := tg.DropTarget(ctx, marker, false); !errors.Is(err, engine.ErrNotOwn) || !has("keep_me") {
				t.Errorf("DropTarget of an existing database: %v, exists=%v", err, has("keep_me"))
			}
			if s.engine == "postgres" {
				// created=true does not override a missing marker.
				if err := tg.DropTarget(ctx, marker, true); !errors.Is(err, engine.ErrNotOwn) || !has("keep_me") {
					t.Errorf("DropTarget without the marker: %v, exists=%v", err, has("keep_me"))
				}
			}
			createStoppedWhileWaiting(t, s, target("scratch_stop"), marker, has)
		})
	}
}

// createStoppedWhileWaiting stops (cancels the context of) a CREATE DATABASE
// the server holds back, and then lets the server go on: the server
// creates the database, so CreateTarget must report it as the restore's
// own (PostgreSQL: with its marker set), and DropTarget must drop it. Then
// once more not stopped, with the time a stopped CREATE is given cut to
// 1 ms: a CREATE that is not stopped must wait for the server however long.
// Before, the client was killed, CreateTarget failed without knowing, and
// the database stayed (a scratch database left after its pod was deleted;
// CI, stop 44). What holds the CREATE back: on MariaDB another session's
// FLUSH TABLES WITH READ LOCK; on PostgreSQL another session's
// uncommitted rename of template1 (its lock on the template database,
// which CREATE DATABASE waits for; rolled back, so the name stays).
func createStoppedWhileWaiting(t *testing.T, s targetServer, tg engine.Target, marker string, has func(string) bool) {
	bg := context.Background()
	hold, release := []string{"FLUSH TABLES WITH READ LOCK"}, "UNLOCK TABLES"
	waiting := "SELECT COUNT(*) FROM information_schema.PROCESSLIST WHERE INFO LIKE 'CREATE DATABASE%scratch_stop%'"
	var exec func(q string) error
	if s.engine == "postgres" {
		hold, release = []string{"BEGIN", "ALTER DATABASE template1 RENAME TO template1_held"}, "ROLLBACK"
		waiting = "SELECT count(*) FROM pg_stat_activity WHERE query LIKE 'CREATE DATABASE%scratch_stop%' AND wait_event_type = 'Lock'"
		c, err := pgx.Connect(bg, fmt.Sprintf("postgres://%s:%s@127.0.0.1:%d/postgres?sslmode=disable", s.conn.User, s.conn.Password, s.conn.Port))
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close(bg)
		exec = func(q string) error { _, err := c.Exec(bg, q); return err }
	} else {
		db, err := sql.Open("mysql", fmt.Sprintf("%s:%s@tcp(127.0.0.1:%d)/", s.conn.User, s.conn.Password, s.conn.Port))
		if err != nil {
			t.Fatal(err)
		}
		defer db.Close()
		c, err := db.Conn(bg)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		exec = func(q string) error { _, err := c.ExecContext(bg, q); return err }
	}
	// One round: hold the CREATE, stop it or not, let the server go on.
	round := func(stop bool) {
		t.Helper()
		for _, q := range hold {
			if err := exec(q); err != nil {
				t.Fatalf("%s: %v", q, err)
			}
		}
		held := true
		defer func() {
			if held {
				exec(release)
			}
		}()
		ctx, cancel := context.WithCancel(bg)
		defer cancel()
		type result struct {
			own bool
			err error
		}
		done := make(chan result, 1)
		go func() {
			own, err := tg.CreateTarget(ctx, marker)
			done <- result{own, err}
		}()
		err := testenv.Poll(time.Minute, 20*time.Millisecond, func() error {
			select {
			case r := <-done: // returned while the server holds the CREATE
				done <- r
				return nil
			default:
			}
			out, err := s.sql(s.admin, waiting)
			if err != nil {
				return err
			}
			if strings.TrimSpace(out) != "1" {
				return errors.New("the CREATE DATABASE is not waiting on the server yet")
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
		if stop {
			cancel()
		}
		if err := exec(release); err != nil {
			t.Fatal(err)
		}
		held = false
		r := <-done
		if r.err != nil && !has("scratch_stop") {
			t.Fatalf("CreateTarget (stopped=%v) gave up on a CREATE the server held: %v", stop, r.err)
		}
		if err := testenv.Poll(time.Minute, 20*time.Millisecond, func() error {
			if !has("scratch_stop") {
				return errors.New("scratch_stop not created yet")
			}
			return nil
		}); err != nil {
			t.Fatalf("stopped=%v: the server never created the database (CreateTarget: own=%v err=%v)", stop, r.own, r.err)
		}
		if r.err != nil || !r.own {
			t.Errorf("CreateTarget (stopped=%v) while the server created the database: own=%v err=%v; the database exists and nobody will drop it", stop, r.own, r.err)
		}
		if err := tg.DropTarget(bg, marker, r.own); err != nil || has("scratch_stop") {
			t.Errorf("DropTarget after the held create (stopped=%v): %v, exists=%v", stop, err, has("scratch_stop"))
		}
	}
	round(true)
	// Not stopped: the CREATE waits as long as the server holds it, however
	// short the time a stopped one is given.
	defer engine.SetCreateTimeout(time.Millisecond)()
	round(false)

	// Stopped before: nothing is sent.
	ctx, cancel := context.WithCancel(bg)
	cancel()
	if own, err := tg.CreateTarget(ctx, marker); !errors.Is(err, context.Canceled) || own || has("scratch_stop") {
		t.Errorf("CreateTarget with a stopped context: own=%v err=%v exists=%v", own, err, has("scratch_stop"))
	}
}
