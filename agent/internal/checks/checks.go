// Package checks runs a restore's verification checks (CAIRN_CHECKS) in the
// restored database: SQL queries with an expected value, and the restored
// tables' row counts compared with those the backup recorded.
package checks

import (
	"context"
	"encoding/json"
	"fmt"
	"math/big"
	"regexp"
	"strings"
	"time"

	"cairn.dev/agent/contract"
	"cairn.dev/agent/internal/engine"
)

// MaxChecks is the most checks one restore runs (the RestoreJob API's limit).
const MaxChecks = 32

// MaxValueBytes bounds a reported value; longer values are cut.
const MaxValueBytes = 256

var namePattern = regexp.MustCompile(`^[a-z0-9]([-a-z0-9]*[a-z0-9])?$`)

// Parse decodes and validates the JSON list of checks (the RestoreJob's
// spec.checks). Empty input means no checks.
func Parse(s string) ([]contract.Check, error) {
	if strings.TrimSpace(s) == "" {
		return nil, nil
	}
	dec := json.NewDecoder(strings.NewReader(s))
	dec.DisallowUnknownFields()
	var cs []contract.Check
	if err := dec.Decode(&cs); err != nil {
		return nil, fmt.Errorf("checks: not a JSON list of checks: %w", err)
	}
	if len(cs) > MaxChecks {
		return nil, fmt.Errorf("checks: %d given, at most %d", len(cs), MaxChecks)
	}
	seen := map[string]bool{}
	for i, c := range cs {
		switch {
		case len(c.Name) > 63 || !namePattern.MatchString(c.Name):
			return nil, fmt.Errorf("checks[%d]: name %q: want lower-case letters, digits and '-', at most 63", i, c.Name)
		case seen[c.Name]:
			return nil, fmt.Errorf("checks[%d]: name %q is used twice", i, c.Name)
		case (c.SQL != "") == c.RowCountsMatchBackup:
			return nil, fmt.Errorf("checks[%d] %s: set exactly one of sql or rowCountsMatchBackup", i, c.Name)
		case c.SQL != "" && c.Equals == nil && c.AtLeast == nil && c.AtMost == nil:
			return nil, fmt.Errorf("checks[%d] %s: a sql check needs equals, atLeast or atMost", i, c.Name)
		case c.SQL == "" && (c.Equals != nil || c.AtLeast != nil || c.AtMost != nil):
			return nil, fmt.Errorf("checks[%d] %s: equals, atLeast and atMost apply to a sql check only", i, c.Name)
		}
		seen[c.Name] = true
	}
	return cs, nil
}

// Querier runs a read-only query returning one value (Postgres, MySQL).
type Querier interface {
	QueryValue(ctx context.Context, sql string) (string, error)
}

// RowCounts compares the restored tables' row counts with those the backup
// recorded. It returns a summary (e.g. "3 tables, 8000 rows") and one line
// per difference; no differences means the counts match.
type RowCounts func(ctx context.Context) (summary string, differences []string, err error)

// Run runs every check, in order, and returns one result per check. A check
// that cannot run (a SQL error, no recorded counts) fails with the reason;
// Run itself never fails, so every check is reported.
func Run(ctx context.Context, q Querier, cs []contract.Check, rows RowCounts) []contract.CheckResult {
	out := make([]contract.CheckResult, 0, len(cs))
	for _, c := range cs {
		var r contract.CheckResult
		if c.RowCountsMatchBackup {
			r = rowCounts(ctx, c, rows)
		} else {
			r = sqlCheck(ctx, q, c)
		}
		r.Name = c.Name
		r.Value = cut(r.Value, MaxValueBytes)
		r.Message = cut(strings.Join(strings.Fields(r.Message), " "), 4*MaxValueBytes)
		out = append(out, r)
	}
	return out
}

func sqlCheck(ctx context.Context, q Querier, c contract.Check) contract.CheckResult {
	v, err := q.QueryValue(ctx, c.SQL)
	if err != nil {
		return contract.CheckResult{Message: "query failed: " + err.Error()}
	}
	r := contract.CheckResult{Value: v, Passed: true}
	var why []string
	if c.Equals != nil && v != *c.Equals {
		why = append(why, fmt.Sprintf("%q is not %q", v, *c.Equals))
	}
	if c.AtLeast != nil || c.AtMost != nil {
		n, ok := new(big.Rat).SetString(strings.TrimSpace(v))
		if !ok {
			why = append(why, fmt.Sprintf("%q is not a number", v))
		} else {
			if c.AtLeast != nil && n.Cmp(new(big.Rat).SetInt64(*c.AtLeast)) < 0 {
				why = append(why, fmt.Sprintf("%s is less than %d", v, *c.AtLeast))
			}
			if c.AtMost != nil && n.Cmp(new(big.Rat).SetInt64(*c.AtMost)) > 0 {
				why = append(why, fmt.Sprintf("%s is more than %d", v, *c.AtMost))
			}
		}
	}
	if len(why) > 0 {
		r.Passed = false
		r.Message = strings.Join(why, "; ")
	}
	return r
}

func rowCounts(ctx context.Context, _ contract.Check, rows RowCounts) contract.CheckResult {
	if rows == nil {
		return contract.CheckResult{Message: "row counts cannot be compared: the backup recorded none"}
	}
	summary, diffs, err := rows(ctx)
	if err != nil {
		return contract.CheckResult{Value: summary, Message: err.Error()}
	}
	if len(diffs) > 0 {
		return contract.CheckResult{Value: summary, Message: fmt.Sprintf("%d table(s) differ: %s", len(diffs), strings.Join(diffs, "; "))}
	}
	return contract.CheckResult{Value: summary, Passed: true}
}

// cut shortens s to at most n bytes, on a rune boundary, marking the cut.
func cut(s string, n int) string {
	if len(s) <= n {
		return s
	}
	i := n - len("…")
	for i > 0 && s[i]&0xC0 == 0x80 {
		i--
	}
	return s[:i] + "…"
}

// For returns the Querier that runs SQL checks in eng's database, each
// bounded by timeout.
func For(eng engine.Engine, timeout time.Duration) (Querier, error) {
	switch e := eng.(type) {
	case *engine.Postgres:
		return &Postgres{Conn: e.Conn, Timeout: timeout}, nil
	case *engine.MySQL:
		return &MySQL{Conn: e.Conn, Timeout: timeout}, nil
	}
	return nil, fmt.Errorf("engine %s cannot run checks", eng.Name())
}
