package names_test

import (
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/util/validation"

	"cairn.dev/libs/names"
)

func TestPrefix(t *testing.T) {
	for _, tc := range []struct {
		name string
		max  int
		want string
	}{
		{"orders", 47, "orders"},
		{"orders", 3, "ord"},
		{"orders-db", 7, "orders"},   // the cut lands after a '-'
		{"orders.db", 7, "orders"},   // ... after a '.'
		{"orders-.-db", 9, "orders"}, // several in a row
		{"a-b", 2, "a"},
		{"a.b.c", 4, "a.b"}, // dots inside stay
		{"orders", 0, ""},
		{"orders", -1, ""},
		{strings.Repeat("a", 46) + ".b", 47, strings.Repeat("a", 46)},
		{strings.Repeat("a", 44) + "-bcd", 45, strings.Repeat("a", 44)},
	} {
		if got := names.Prefix(tc.name, tc.max); got != tc.want {
			t.Errorf("Prefix(%q, %d) = %q, want %q", tc.name, tc.max, got, tc.want)
		}
	}
}

// FuzzPrefix: for every valid object name and every cut, the prefix is a
// prefix of the name, fits, ends in a letter or digit, and a name built
// from it with a suffix is a valid object name (and label).
func FuzzPrefix(f *testing.F) {
	for _, s := range []string{"orders", "orders-db", "a.b-c", strings.Repeat("ab-.", 20), strings.Repeat("x", 52)} {
		f.Add(s, 47)
		f.Add(s, 45)
	}
	f.Fuzz(func(t *testing.T, name string, max int) {
		if max < 0 || max > 300 || len(validation.IsDNS1123Subdomain(name)) != 0 {
			return
		}
		p := names.Prefix(name, max)
		if !strings.HasPrefix(name, p) || len(p) > max {
			t.Fatalf("Prefix(%q, %d) = %q: not a prefix that fits", name, max, p)
		}
		if p == "" {
			return // max 0: nothing of the name fits
		}
		if c := p[len(p)-1]; !('a' <= c && c <= 'z' || '0' <= c && c <= '9') {
			t.Fatalf("Prefix(%q, %d) = %q ends in %q", name, max, p, c)
		}
		child := p + "-now-0123456789"
		if len(child) > validation.DNS1123SubdomainMaxLength {
			return // callers cut to fit their suffix; a longer max is not a real cut
		}
		if errs := validation.IsDNS1123Subdomain(child); len(errs) != 0 {
			t.Fatalf("%q: %v", child, errs)
		}
		if len(validation.IsDNS1123Label(name)) == 0 && len(validation.IsDNS1123Label(child)) != 0 && len(child) <= 63 {
			t.Fatalf("%q from the label %q is not a label", child, name)
		}
	})
}

func TestRequest(t *testing.T) {
	name, h := names.Request("shop", "orders-db", "now", "1700000000")
	if len(h) != 10 || name != "orders-db-now-"+h {
		t.Fatalf("Request = %q, %q", name, h)
	}
	if again, _ := names.Request("shop", "orders-db", "now", "1700000000"); again != name {
		t.Fatalf("same request, another name: %q != %q", again, name)
	}
	if other, _ := names.Request("shop", "orders-db", "now", "1700000001"); other == name {
		t.Fatalf("another request, same name %q", other)
	}
	long := strings.Repeat("a", 52)
	if n, _ := names.Request("shop", long, "list", "x"); len(n) > 62 {
		t.Fatalf("name %q is %d bytes, want at most 62", n, len(n))
	}
	if n, _ := names.Request("shop", long, "now", "x"); n[:47] != long[:47] || len(n) != 62 {
		t.Fatalf("run-now name %q: want the 47-byte prefix the backup operator always used", n)
	}
}
