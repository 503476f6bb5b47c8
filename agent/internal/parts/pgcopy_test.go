package parts

import (
	"slices"
	"strings"
	"testing"

	"cairn.dev/agent/internal/inventory"
)

// TestPGCopyPlan: the statements pg_dump writes for one table's data part
// are read back exactly (quoted names, doubled quotes, no columns,
// sequences); anything else is refused, so that the part loads with
// pg_restore instead.
func TestPGCopyPlan(t *testing.T) {
	tbl := inventory.Table{Schema: "x", Name: "evil\"\n\\! touch /tmp/p\n"}
	entries := func(copyStmt string, more ...inventory.ArchiveEntry) []inventory.ArchiveEntry {
		return append([]inventory.ArchiveEntry{
			{ID: 1, Desc: "ENCODING", Defn: "SET client_encoding = 'UTF8';\n"},
			{ID: 2, Desc: "STDSTRINGS", Defn: "SET standard_conforming_strings = 'on';\n"},
			{ID: 3, Desc: "SEARCHPATH", Defn: "SELECT pg_catalog.set_config('search_path', '', false);\n"},
			{ID: 4, Desc: "DATABASE", Tag: "db"},
			{ID: 5, Desc: "DATABASE PROPERTIES", Tag: "db"},
			{ID: 9, Desc: "TABLE DATA", Schema: tbl.Schema, Tag: tbl.Name, HasData: true, CopyStmt: copyStmt},
		}, more...)
	}
	stmt := "COPY x.\"evil\"\"\n\\! touch /tmp/p\n\" (id, \"Weird \"\"Col\"\", x\", g_1) FROM stdin;\n"
	seq := inventory.ArchiveEntry{ID: 10, Desc: "SEQUENCE SET", Defn: "SELECT pg_catalog.setval('x.\"it''s \"\"seq\"\"\"', 4200, true);\n"}
	p, err := newPGCopyPlan(entries(stmt, seq), tbl)
	if err != nil {
		t.Fatal(err)
	}
	want := `COPY "x"."evil""` + "\n" + `\! touch /tmp/p` + "\n" + `" ("id", "Weird ""Col"", x", "g_1") FROM STDIN`
	if p.data != 9 || p.copy != want || !slices.Equal(p.seqs, []pgSeqSet{{name: `x."it's ""seq"""`, value: 4200, called: true}}) {
		t.Fatalf("plan %+v\nwant copy %s", p, want)
	}
	if p, err := newPGCopyPlan(entries("COPY x.\"evil\"\"\n\\! touch /tmp/p\n\"  FROM stdin;\n"), tbl); err != nil || !strings.HasSuffix(p.copy, `" FROM STDIN`) {
		t.Fatalf("no columns: %+v %v", p, err)
	}
	if s, err := parseSetval("SELECT pg_catalog.setval('public.s', -5, false);\n"); err != nil || s != (pgSeqSet{name: "public.s", value: -5}) {
		t.Fatalf("setval: %+v %v", s, err)
	}
	other := tbl
	other.Name = "other"
	for name, es := range map[string][]inventory.ArchiveEntry{
		"LATIN1":                {{ID: 1, Desc: "ENCODING", Defn: "SET client_encoding = 'LATIN1';\n"}, entries(stmt)[5]},
		"no encoding":           entries(stmt)[1:],
		"no table data":         entries(stmt)[:5],
		"another table":         entries(strings.Replace(stmt, "evil", "evi", 1)),
		"uppercase bare":        entries(strings.Replace(stmt, "(id,", "(Id,", 1)),
		"more after FROM":       entries(strings.Replace(stmt, "stdin;", "stdin; DROP TABLE t;", 1)),
		"WITH":                  entries(strings.Replace(stmt, "FROM stdin", "FROM stdin WITH (FORMAT csv)", 1)),
		"unclosed quote":        entries("COPY x.\"evil FROM stdin;\n"),
		"empty column":          entries(strings.Replace(stmt, "(id,", "(\"\",", 1)),
		"a BLOBS entry":         entries(stmt, inventory.ArchiveEntry{ID: 11, Desc: "BLOBS", HasData: true}),
		"two table data":        entries(stmt, entries(stmt)[5]),
		"E'' setval":            entries(stmt, inventory.ArchiveEntry{ID: 10, Desc: "SEQUENCE SET", Defn: "SELECT pg_catalog.setval(E'x.s', 1, true);\n"}),
		"setval and more":       entries(stmt, inventory.ArchiveEntry{ID: 10, Desc: "SEQUENCE SET", Defn: "SELECT pg_catalog.setval('x.s', 1, true); DROP TABLE t;\n"}),
		"setval not a number":   entries(stmt, inventory.ArchiveEntry{ID: 10, Desc: "SEQUENCE SET", Defn: "SELECT pg_catalog.setval('x.s', 1+1, true);\n"}),
		"entry of another kind": entries(stmt, inventory.ArchiveEntry{ID: 12, Desc: "ACL"}),
	} {
		if p, err := newPGCopyPlan(es, tbl); err == nil {
			t.Errorf("%s: accepted: %+v", name, p)
		}
	}
	if _, err := newPGCopyPlan(entries(stmt), other); err == nil {
		t.Error("the part of another table accepted")
	}
}
