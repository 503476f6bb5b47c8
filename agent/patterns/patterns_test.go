package patterns

import (
	"regexp"
	"strings"
	"testing"
)

func TestParse(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want string // patterns joined by "|", or "error: <substring>"
	}{
		{"", ""},
		{"  ", ""},
		{"public", "public"},
		{"public.orders", "public.orders"},
		{" public.orders , sales ", "public.orders|sales"},
		{"*.audit_*", "*.audit_*"},
		{"s.t.with.dots", "s.t.with.dots"},
		{"a,,b", "error: empty pattern"},
		{"a,", "error: empty pattern"},
		{".orders", "error: no schema"},
		{"public.", "error: no table"},
		{"pub\nlic", "error: control character"},
		{"\xff", "error: UTF-8"},
		{strings.Repeat("x", 300), "error: longer than"},
		{strings.Repeat("a,", 300) + "a", "error: at most"},
	} {
		ps, err := Parse(tc.in)
		if want, ok := strings.CutPrefix(tc.want, "error: "); ok {
			if err == nil || !strings.Contains(err.Error(), want) {
				t.Errorf("Parse(%q) = %v, %v; want an error with %q", tc.in, ps, err, want)
			}
			continue
		}
		if err != nil {
			t.Errorf("Parse(%q): %v", tc.in, err)
			continue
		}
		var got []string
		for _, p := range ps {
			got = append(got, p.String())
		}
		if g := strings.Join(got, "|"); g != tc.want {
			t.Errorf("Parse(%q) = %q, want %q", tc.in, g, tc.want)
		}
	}
}

func TestFilter(t *testing.T) {
	for _, tc := range []struct {
		include, exclude string
		schema, table    string
		want             bool
	}{
		{"", "", "public", "orders", true},
		{"public", "", "public", "orders", true},
		{"public", "", "sales", "orders", false},
		{"public.orders", "", "public", "orders", true},
		{"public.orders", "", "public", "orders2", false},
		{"public.order?", "", "public", "orders", true},
		{"public.order?", "", "public", "order", false},
		{"*.audit_*", "", "x", "audit_log", true},
		{"*.audit_*", "", "x", "audit", false},
		{"", "public.tmp_*", "public", "tmp_1", false},
		{"", "public.tmp_*", "public", "orders", true},
		{"public", "public.tmp_*", "public", "tmp_1", false},
		{"public.tmp_1", "public", "public", "tmp_1", false}, // exclude wins
		{"Public", "", "public", "orders", false},            // case-sensitive
		{"s", "", "s", "t.with.dots", true},
		{"s.t.with.*", "", "s", "t.with.dots", true},
		{"渡辺.*", "", "渡辺", "表", true},
		{"?.t", "", "渡", "t", true},
	} {
		f, err := NewFilter(tc.include, tc.exclude)
		if err != nil {
			t.Fatal(err)
		}
		if got := f.Match(tc.schema, tc.table); got != tc.want {
			t.Errorf("include %q exclude %q: Match(%q, %q) = %v, want %v", tc.include, tc.exclude, tc.schema, tc.table, got, tc.want)
		}
	}
}

func TestSchemaLevel(t *testing.T) {
	f, _ := NewFilter("a,b", "c")
	if !f.SchemaLevel() {
		t.Error("a,b / c is schema-level")
	}
	f, _ = NewFilter("a", "a.t")
	if f.SchemaLevel() {
		t.Error("a / a.t is not schema-level")
	}
	if !(*Filter)(nil).Empty() {
		t.Error("nil filter is empty")
	}
}

// globRegexp is the reference: the same glob as a regular expression.
func globRegexp(p string) *regexp.Regexp {
	var b strings.Builder
	b.WriteString("^(?s:")
	for _, r := range p {
		switch r {
		case '*':
			b.WriteString(".*")
		case '?':
			b.WriteString(".")
		default:
			b.WriteString(regexp.QuoteMeta(string(r)))
		}
	}
	b.WriteString(")$")
	return regexp.MustCompile(b.String())
}

func FuzzGlob(f *testing.F) {
	for _, s := range [][2]string{{"a*b", "axxb"}, {"*", ""}, {"?", "渡"}, {"a?c*", "abcdef"}, {"**a", "ba"}, {"*a*a*a*b", "aaaaaaaaaaaaaaaaaaaaaaaaaaaaa"}} {
		f.Add(s[0], s[1])
	}
	f.Fuzz(func(t *testing.T, pattern, s string) {
		if len(pattern) > 64 || len(s) > 64 || !utf8Valid(pattern) || !utf8Valid(s) {
			return
		}
		if got, want := Glob(pattern, s), globRegexp(pattern).MatchString(s); got != want {
			t.Fatalf("Glob(%q, %q) = %v, regexp says %v", pattern, s, got, want)
		}
	})
}

func FuzzParse(f *testing.F) {
	for _, s := range []string{"", "a", "a.b", "a,b.c", ",", ".", "a.", "*.*", "a.b.c"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, list string) {
		ps, err := Parse(list)
		if err != nil {
			return
		}
		// What parses, re-parses to the same patterns from its String form.
		var parts []string
		for _, p := range ps {
			if p.Schema == "" || (!p.IsSchema && p.Table == "") {
				t.Fatalf("Parse(%q) yielded an empty part: %+v", list, p)
			}
			parts = append(parts, p.String())
		}
		again, err := Parse(strings.Join(parts, ","))
		if err != nil || len(again) != len(ps) {
			t.Fatalf("re-parse of %q: %v, %v", list, again, err)
		}
		for i := range ps {
			if again[i] != ps[i] {
				t.Fatalf("re-parse of %q: %+v != %+v", list, again[i], ps[i])
			}
		}
	})
}

func utf8Valid(s string) bool { return strings.ToValidUTF8(s, "\uFFFD") == s }
