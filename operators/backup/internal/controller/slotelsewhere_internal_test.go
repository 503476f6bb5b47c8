package controller

import "testing"

// A host the release Job in the operator's namespace could not resolve (a
// short Service name of the tenant's namespace) is qualified; anything
// else is left as written.
func TestHostElsewhere(t *testing.T) {
	for host, want := range map[string]string{
		"orders-db":        "orders-db.shop.svc",
		"orders-db.db":     "orders-db.db",
		"orders-db.db.svc": "orders-db.db.svc",
		"pg.example.com":   "pg.example.com",
		"10.0.0.7":         "10.0.0.7",
		"fd00::7":          "fd00::7",
		"localhost":        "localhost",
		"":                 "",
	} {
		if got := hostElsewhere(host, "shop"); got != want {
			t.Errorf("hostElsewhere(%q) = %q, want %q", host, got, want)
		}
	}
}
