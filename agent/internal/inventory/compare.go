package inventory

import (
	"slices"
	"strings"

	"cairn.dev/agent/contract"
)

// Compare compares the target's inventory with the source's, in both
// directions: tables missing on the target, tables only on the target, row
// counts, and (method Checksum, when both sides have one) content
// checksums. Items list mismatches first, then matches, each sorted by
// table.
func Compare(src, dst *Inventory, method string) *contract.Verification {
	v := &contract.Verification{Method: method}
	var bad, good []contract.TableCheck
	seen := map[string]bool{}
	for _, s := range src.Tables {
		k := s.Key()
		seen[k] = true
		c := contract.TableCheck{Table: k, SourceRows: s.Rows, TargetRows: -1}
		d, ok := dst.Find(k)
		switch {
		case !ok:
			c.Reason = "missing on target"
		case d.Rows != s.Rows:
			c.TargetRows, c.Reason = d.Rows, "rows differ"
		case method == MethodChecksum && s.Checksum != d.Checksum:
			c.TargetRows, c.Reason = d.Rows, "content differs"
		default:
			c.TargetRows, c.Match = d.Rows, true
		}
		if c.Match {
			good = append(good, c)
		} else {
			bad = append(bad, c)
		}
	}
	for _, d := range dst.Tables {
		if !seen[d.Key()] {
			bad = append(bad, contract.TableCheck{Table: d.Key(), SourceRows: -1, TargetRows: d.Rows, Reason: "only on target"})
		}
	}
	byName := func(a, b contract.TableCheck) int { return strings.Compare(a.Table, b.Table) }
	slices.SortFunc(bad, byName)
	slices.SortFunc(good, byName)
	v.Items = append(bad, good...)
	v.Tables, v.Matched, v.Mismatched = len(v.Items), len(good), len(bad)
	return v
}

// Mismatched returns the names of the mismatched tables of v.
func Mismatched(v *contract.Verification) []string {
	var out []string
	for _, c := range v.Items {
		if !c.Match {
			out = append(out, c.Table)
		}
	}
	return out
}
