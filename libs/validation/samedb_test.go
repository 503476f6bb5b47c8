package validation

import (
	"testing"

	cairnv1 "cairn.dev/apis/meta/v1"
)

func TestCanonicalHost(t *testing.T) {
	for _, tc := range []struct {
		host, ns, want string
		local          bool
	}{
		{"db", "shop", "db.shop.svc", true},
		{"DB", "shop", "db.shop.svc", true},
		{"db.", "shop", "db.shop.svc", true},
		{"db.shop", "other", "db.shop.svc", true},
		{"db.shop.svc", "other", "db.shop.svc", true},
		{"db.shop.svc.cluster.local", "other", "db.shop.svc", true},
		{"db.shop.svc.cluster.local.", "other", "db.shop.svc", true},
		{"db.shop.svc.corp.example", "other", "db.shop.svc", true},
		{"pod-0.db-headless.shop.svc.cluster.local", "shop", "pod-0.db-headless.shop.svc", true},
		{"orders.example.com", "shop", "orders.example.com", false},
		{"Orders.Example.COM.", "shop", "orders.example.com", false},
		{"localhost", "shop", "localhost", true},
		{"LOCALHOST.", "shop", "localhost", true},
		{"127.0.0.1", "shop", "localhost", true},
		{"127.1.2.3", "shop", "localhost", true},
		{"::1", "shop", "localhost", true},
		{"[::1]", "shop", "localhost", true},
		{"0:0:0:0:0:0:0:1", "shop", "localhost", true},
		{"10.0.3.7", "shop", "10.0.3.7", true},
		{"::ffff:10.0.3.7", "shop", "10.0.3.7", true},
		{"2001:db8:0:0::7", "shop", "2001:db8::7", false},
		{"203.0.113.9", "shop", "203.0.113.9", false},
	} {
		got, local := CanonicalHost(tc.host, tc.ns)
		if got != tc.want || local != tc.local {
			t.Errorf("CanonicalHost(%q, %q) = %q, %v; want %q, %v", tc.host, tc.ns, got, local, tc.want, tc.local)
		}
	}
}

// TestSameDatabase: every spelling of one address is one database; what
// spelling cannot tell (two addresses of one server) is left to the agent.
func TestSameDatabase(t *testing.T) {
	pg := func(host string, port int32, db string) cairnv1.DatabaseRef {
		return cairnv1.DatabaseRef{Engine: cairnv1.PostgresEngine, Host: host, Port: port, Database: db}
	}
	my := func(host string, port int32, db string) cairnv1.DatabaseRef {
		return cairnv1.DatabaseRef{Engine: cairnv1.MySQLEngine, Host: host, Port: port, Database: db}
	}
	shop := Scope{Namespace: "shop"}
	src := pg("orders-db", 0, "orders")
	for _, tc := range []struct {
		name string
		b    cairnv1.DatabaseRef
		bs   Scope
		same bool
	}{
		{"identical", src, shop, true},
		{"namespace added", pg("orders-db.shop", 0, "orders"), shop, true},
		{"svc", pg("orders-db.shop.svc", 0, "orders"), shop, true},
		{"cluster domain", pg("orders-db.shop.svc.cluster.local", 0, "orders"), shop, true},
		{"trailing dot and capitals", pg("Orders-DB.shop.svc.cluster.local.", 0, "orders"), shop, true},
		{"default port spelt out", pg("orders-db", 5432, "orders"), shop, true},
		{"seen from another namespace", pg("orders-db.shop", 0, "orders"), Scope{Namespace: "ops"}, true},
		{"short name in another namespace", pg("orders-db", 0, "orders"), Scope{Namespace: "ops"}, false},
		{"other port", pg("orders-db", 5433, "orders"), shop, false},
		{"other database", pg("orders-db", 0, "orders_new"), shop, false},
		{"postgres names are case-sensitive", pg("orders-db", 0, "Orders"), shop, false},
		{"other engine", my("orders-db", 5432, "orders"), shop, false},
		{"empty engine matches", cairnv1.DatabaseRef{Host: "orders-db", Database: "orders"}, shop, true},
		{"another cluster, same service name", src, Scope{Namespace: "shop", Cluster: "dr"}, false},
		// Left to the agent: spelling cannot tell.
		{"an IP address of it", pg("10.0.3.7", 0, "orders"), shop, false},
		{"a headless pod name", pg("orders-db-0.orders-db-hl.shop.svc", 0, "orders"), shop, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := SameDatabase(src, shop, tc.b, tc.bs); got != tc.same {
				t.Fatalf("SameDatabase(%+v, %+v) = %v, want %v", tc.b, tc.bs, got, tc.same)
			}
			if got := SameDatabase(tc.b, tc.bs, src, shop); got != tc.same {
				t.Fatalf("not symmetric: SameDatabase(%+v, %+v) = %v, want %v", tc.b, tc.bs, got, tc.same)
			}
		})
	}
	for _, tc := range []struct {
		name string
		a, b cairnv1.DatabaseRef
		as   Scope
		bs   Scope
		same bool
	}{
		{"loopback spellings", pg("localhost", 0, "o"), pg("127.0.0.1", 5432, "o"), shop, shop, true},
		{"ipv6 loopback", pg("::1", 0, "o"), pg("LOCALHOST.", 0, "o"), shop, shop, true},
		{"ip forms", pg("2001:db8::7", 0, "o"), pg("2001:DB8:0:0:0:0:0:7", 0, "o"), shop, shop, true},
		{"public name across clusters", pg("db.example.com", 0, "o"), pg("DB.example.com.", 0, "o"), shop, Scope{Namespace: "x", Cluster: "dr"}, true},
		{"public ip across clusters", pg("203.0.113.9", 0, "o"), pg("203.0.113.9", 0, "o"), shop, Scope{Cluster: "dr"}, true},
		{"private ip across clusters", pg("10.0.0.9", 0, "o"), pg("10.0.0.9", 0, "o"), shop, Scope{Cluster: "dr"}, false},
		{"mysql names fold", my("db", 0, "Shop"), my("db.shop.svc", 3306, "shop"), shop, shop, true},
		{"mysql upper case", my("db", 0, "shop"), my("db", 0, "SHOP"), shop, shop, true},
		{"mysql other", my("db", 0, "shop"), my("db", 0, "shop2"), shop, shop, false},
		{"mysql default port", my("db", 0, "shop"), my("db", 5432, "shop"), shop, shop, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := SameDatabase(tc.a, tc.as, tc.b, tc.bs); got != tc.same {
				t.Fatalf("SameDatabase = %v, want %v", got, tc.same)
			}
		})
	}
}
