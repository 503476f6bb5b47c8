package identity_test

import (
	"context"
	"errors"
	"strconv"
	"strings"
	"testing"
	"time"

	"cairn.dev/agent/internal/engine"
	"cairn.dev/agent/internal/identity"
	"cairn.dev/agent/internal/testenv"
)

const password = "id-PASSWORD-3c9e"

func TestMatch(t *testing.T) {
	pg := func(server, db string, oid uint32) identity.ID {
		return identity.ID{Engine: "postgres", Server: server, Database: db, OID: oid}
	}
	my := func(server, db string, fold bool) identity.ID {
		return identity.ID{Engine: "mysql", Server: server, Database: db, FoldCase: fold}
	}
	for _, c := range []struct {
		name        string
		a, b        identity.ID
		same, known bool
	}{
		{"same server and oid", pg("s=1", "orders", 16384), pg("s=1", "orders", 16384), true, true},
		{"renamed database, same oid", pg("s=1", "orders", 16384), pg("s=1", "orders_old", 16384), true, true},
		{"same name, recreated", pg("s=1", "orders", 16384), pg("s=1", "orders", 16999), true, true},
		{"other database", pg("s=1", "orders", 16384), pg("s=1", "scratch", 16385), false, true},
		{"postgres names are case-sensitive", pg("s=1", "orders", 16384), pg("s=1", "Orders", 16385), false, true},
		{"other server, same oid and name", pg("s=1", "orders", 16384), pg("s=2", "orders", 16384), false, true},
		{"unidentified source", pg("", "orders", 16384), pg("s=1", "orders", 16384), false, false},
		{"unidentified target", pg("s=1", "orders", 16384), pg("", "orders", 16384), false, false},
		{"engines differ", pg("s=1", "orders", 1), my("s=1", "orders", false), false, true},
		{"mysql same schema", my("u=1", "shop", false), my("u=1", "shop", false), true, true},
		{"mysql case folded", my("u=1", "shop", true), my("u=1", "SHOP", true), true, true},
		{"mysql case kept", my("u=1", "shop", false), my("u=1", "SHOP", false), false, true},
		{"mysql other server", my("u=1", "shop", false), my("u=2", "shop", false), false, true},
	} {
		t.Run(c.name, func(t *testing.T) {
			same, matched, known := identity.Match(c.a, c.b)
			if same != c.same || known != c.known {
				t.Fatalf("Match = same %v known %v (%q), want same %v known %v", same, known, matched, c.same, c.known)
			}
			if same && matched == "" {
				t.Fatal("a match must say what matched")
			}
		})
	}
}

func ctx(t *testing.T) context.Context {
	c, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	t.Cleanup(cancel)
	return c
}

func wantSame(t *testing.T, err error, matched string) {
	t.Helper()
	var se *identity.SameError
	if !errors.As(err, &se) {
		t.Fatalf("want the target refused as the source, got %v", err)
	}
	if !strings.Contains(se.Error(), matched) || !strings.Contains(se.Error(), se.Source) || !strings.Contains(se.Error(), se.Target) {
		t.Fatalf("message %q does not name both sides and %q", se.Error(), matched)
	}
}

// TestPostgres compares databases of one real server reached by three
// addresses, as a superuser (system_identifier) and as a user that may not
// call pg_control_system() (the pg_stat_activity probe).
func TestPostgres(t *testing.T) {
	p, err := testenv.StartPostgres(password)
	if err != nil {
		t.Fatal(err)
	}
	defer p.Stop()
	proxy, err := testenv.NewProxy("127.0.0.1:" + strconv.Itoa(p.Port))
	if err != nil {
		t.Fatal(err)
	}
	defer proxy.Close()
	// Function privileges are per database: revoke in the template.
	if _, err := p.SQL("template1", "REVOKE EXECUTE ON FUNCTION pg_control_system() FROM PUBLIC"); err != nil {
		t.Fatal(err)
	}
	if _, err := p.SQL("postgres", `CREATE DATABASE orders; CREATE DATABASE scratch;
		CREATE ROLE app LOGIN PASSWORD '`+password+`';`); err != nil {
		t.Fatal(err)
	}
	for _, user := range []string{"postgres", "app"} {
		t.Run(user, func(t *testing.T) {
			conn := func(host string, port int, db string) engine.Conn {
				return engine.Conn{Host: host, Port: port, Database: db, User: user, Password: password}
			}
			src := conn("127.0.0.1", p.Port, "orders")
			want := "the same server"
			if user == "app" {
				want = "runs the source's session"
			}
			id, exists, err := identity.Read(ctx(t), "postgres", src)
			if err != nil || !exists || id.Database != "orders" || id.OID == 0 {
				t.Fatalf("Read: %+v exists %v: %v", id, exists, err)
			}
			if (user == "app") != (id.Server == "") {
				t.Fatalf("Read as %s: server %q (%s)", user, id.Server, id.Unknown)
			}
			for _, alias := range []engine.Conn{
				conn("localhost", p.Port, "orders"),
				conn("127.0.0.1", proxy.Port(), "orders"),
				conn("localhost", proxy.Port(), "orders"),
				src,
			} {
				wantSame(t, identity.CheckPair(ctx(t), "postgres", "copy", src, alias), want)
				other := alias
				other.Database = "scratch"
				if err := identity.CheckPair(ctx(t), "postgres", "copy", src, other); err != nil {
					t.Fatalf("another database via %s:%d refused: %v", other.Host, other.Port, err)
				}
				other.Database = "missing"
				if err := identity.CheckPair(ctx(t), "postgres", "copy", src, other); err != nil {
					t.Fatalf("a database that does not exist via %s:%d refused: %v", other.Host, other.Port, err)
				}
			}
		})
	}

	// A recorded identity (as a backup writes it) against each address.
	src := engine.Conn{Host: "127.0.0.1", Port: p.Port, Database: "orders", User: "postgres", Password: password}
	rec, _, err := identity.Read(ctx(t), "postgres", src)
	if err != nil {
		t.Fatal(err)
	}
	alias := engine.Conn{Host: "localhost", Port: proxy.Port(), Database: "orders", User: "postgres", Password: password}
	checked, _, err := identity.CheckRecorded(ctx(t), "postgres", "restore", &rec, alias)
	if !checked {
		t.Fatal("not checked")
	}
	wantSame(t, err, "database oid")
	alias.Database = "scratch"
	if checked, _, err := identity.CheckRecorded(ctx(t), "postgres", "restore", &rec, alias); !checked || err != nil {
		t.Fatalf("scratch: checked %v, %v", checked, err)
	}
	// Renamed: still the same database (its oid).
	if _, err := p.SQL("postgres", "ALTER DATABASE orders RENAME TO orders_renamed"); err != nil {
		t.Fatal(err)
	}
	alias.Database = "orders_renamed"
	_, _, err = identity.CheckRecorded(ctx(t), "postgres", "restore", &rec, alias)
	wantSame(t, err, "database oid")
	// Unidentified: not checked, and says why.
	if checked, why, err := identity.CheckRecorded(ctx(t), "postgres", "restore", nil, alias); checked || err != nil || why == "" {
		t.Fatalf("no recorded identity: checked %v why %q err %v", checked, why, err)
	}
}

// TestMariaDB: MariaDB has no server_uuid; hostname, port and datadir
// identify it, reached by two addresses.
func TestMariaDB(t *testing.T) {
	m, err := testenv.StartMariaDB("cairn", password)
	if err != nil {
		t.Fatal(err)
	}
	defer m.Stop()
	proxy, err := testenv.NewProxy("127.0.0.1:" + strconv.Itoa(m.Port))
	if err != nil {
		t.Fatal(err)
	}
	defer proxy.Close()
	if _, err := m.SQL("", "CREATE DATABASE shop; CREATE DATABASE scratch"); err != nil {
		t.Fatal(err)
	}
	conn := func(host string, port int, db string) engine.Conn {
		return engine.Conn{Host: host, Port: port, Database: db, User: "cairn", Password: password}
	}
	src := conn("127.0.0.1", m.Port, "shop")
	id, exists, err := identity.Read(ctx(t), "mysql", src)
	if err != nil || !exists || id.Database != "shop" || !strings.Contains(id.Server, "datadir=") {
		t.Fatalf("Read: %+v exists %v: %v", id, exists, err)
	}
	for _, alias := range []engine.Conn{conn("localhost", m.Port, "shop"), conn("127.0.0.1", proxy.Port(), "shop"), src} {
		wantSame(t, identity.CheckPair(ctx(t), "mysql", "copy", src, alias), "the same server")
		checked, _, err := identity.CheckRecorded(ctx(t), "mysql", "restore", &id, alias)
		if !checked {
			t.Fatal("not checked")
		}
		wantSame(t, err, "database name")
		for _, db := range []string{"scratch", "missing"} {
			other := alias
			other.Database = db
			if err := identity.CheckPair(ctx(t), "mysql", "copy", src, other); err != nil {
				t.Fatalf("database %s via %s:%d refused: %v", db, other.Host, other.Port, err)
			}
		}
	}
}
