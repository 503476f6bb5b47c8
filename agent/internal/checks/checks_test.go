package checks

import (
	"context"
	"errors"
	"strings"
	"testing"

	"cairn.dev/agent/contract"
)

func TestParse(t *testing.T) {
	for _, tt := range []struct{ in, err string }{
		{in: ``},
		{in: `[{"name":"a","sql":"select 1","atLeast":1},{"name":"b","rowCountsMatchBackup":true}]`},
		{in: `{"name":"a"}`, err: "not a JSON list"},
		{in: `[{"name":"a","sql":"select 1","atMost":1,"extra":1}]`, err: "unknown field"},
		{in: `[{"name":"A","sql":"select 1","atLeast":1}]`, err: "name"},
		{in: `[{"name":"a","sql":"select 1"}]`, err: "needs equals"},
		{in: `[{"name":"a"}]`, err: "exactly one"},
		{in: `[{"name":"a","sql":"select 1","rowCountsMatchBackup":true,"atLeast":1}]`, err: "exactly one"},
		{in: `[{"name":"a","rowCountsMatchBackup":true,"atLeast":1}]`, err: "sql check only"},
		{in: `[{"name":"a","sql":"select 1","atLeast":1},{"name":"a","rowCountsMatchBackup":true}]`, err: "twice"},
		{in: `[` + strings.TrimSuffix(strings.Repeat(`{"name":"a","rowCountsMatchBackup":true},`, 33), ",") + `]`, err: "at most 32"},
	} {
		_, err := Parse(tt.in)
		if tt.err == "" && err != nil {
			t.Errorf("Parse(%.60s) = %v", tt.in, err)
		}
		if tt.err != "" && (err == nil || !strings.Contains(err.Error(), tt.err)) {
			t.Errorf("Parse(%.60s) = %v, want %q", tt.in, err, tt.err)
		}
	}
}

// answers is a Querier that returns canned values (the comparison logic is
// tested here; the engines' queries are tested against real servers in
// agent/test).
type answers map[string]string

func (a answers) QueryValue(_ context.Context, sql string) (string, error) {
	if v, ok := a[sql]; ok {
		return v, nil
	}
	return "", errors.New("psql failed: ERROR: relation does not exist")
}

func TestRun(t *testing.T) {
	n := func(i int64) *int64 { return &i }
	s := func(v string) *string { return &v }
	q := answers{"int": "12", "dec": "2.50", "text": "ok", "long": strings.Repeat("x", 1000)}
	cs := []contract.Check{
		{Name: "eq", SQL: "text", Equals: s("ok")},
		{Name: "eq-no", SQL: "text", Equals: s("OK")},
		{Name: "range", SQL: "int", AtLeast: n(12), AtMost: n(12)},
		{Name: "low", SQL: "int", AtLeast: n(13)},
		{Name: "high", SQL: "dec", AtMost: n(2)},
		{Name: "dec-ok", SQL: "dec", AtLeast: n(2), AtMost: n(3)},
		{Name: "nan", SQL: "text", AtLeast: n(0)},
		{Name: "err", SQL: "missing", AtLeast: n(0)},
		{Name: "long", SQL: "long", Equals: s("x")},
		{Name: "rows", RowCountsMatchBackup: true},
	}
	rs := Run(context.Background(), q, cs, nil)
	want := map[string]bool{"eq": true, "range": true, "dec-ok": true}
	for i, r := range rs {
		if r.Name != cs[i].Name || r.Passed != want[r.Name] {
			t.Errorf("%d: %+v, want %s passed=%v", i, r, cs[i].Name, want[r.Name])
		}
		if !r.Passed && r.Message == "" {
			t.Errorf("%s failed without a message", r.Name)
		}
		if len(r.Value) > MaxValueBytes || len(r.Message) > 4*MaxValueBytes {
			t.Errorf("%s: value %d bytes, message %d bytes", r.Name, len(r.Value), len(r.Message))
		}
	}
	if !strings.Contains(rs[9].Message, "recorded none") {
		t.Errorf("row counts without a record: %q", rs[9].Message)
	}
	rc := func(context.Context) (string, []string, error) {
		return "2 tables, 10 rows", []string{"public.orders: 4 restored, 5 recorded"}, nil
	}
	rs = Run(context.Background(), q, cs[9:], rc)
	if rs[0].Passed || rs[0].Value != "2 tables, 10 rows" || !strings.Contains(rs[0].Message, "public.orders: 4 restored, 5 recorded") {
		t.Errorf("row counts differ: %+v", rs[0])
	}
}
