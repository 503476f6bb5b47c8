// Package patterns parses and matches the object patterns of a migration
// (CAIRN_MIGRATE_INCLUDE / CAIRN_MIGRATE_EXCLUDE, a MigrationJob's
// spec.objects.include/exclude). It has no dependencies beyond the standard
// library, so operators validate patterns at admission with the same code the
// agent matches them with.
//
// Syntax: a comma-separated list of patterns. A pattern "schema.table"
// matches tables by schema and table name; a pattern without a dot matches a
// schema (for MySQL/MariaDB: a database) by name, i.e. all its tables. In
// each part `*` matches any run of characters (also none) and `?` exactly one
// character; every other character matches itself, case-sensitively. The
// first dot separates schema from table, so the table part may contain dots.
// Spaces around a pattern are ignored. An empty include list selects every
// table; exclude wins over include.
package patterns

import (
	"fmt"
	"strings"
	"unicode"
	"unicode/utf8"
)

// Pattern is one parsed pattern.
type Pattern struct {
	// Schema and Table are the glob parts; Table is "" for a schema pattern.
	Schema, Table string
	// IsSchema is true for a pattern without a dot.
	IsSchema bool
}

// String returns the pattern as written (normalised).
func (p Pattern) String() string {
	if p.IsSchema {
		return p.Schema
	}
	return p.Schema + "." + p.Table
}

// MaxPatterns and MaxPatternLength bound a list.
const (
	MaxPatterns      = 256
	MaxPatternLength = 256
)

// Parse parses a comma-separated list. The empty string is an empty list.
func Parse(list string) ([]Pattern, error) {
	if strings.TrimSpace(list) == "" {
		return nil, nil
	}
	items := strings.Split(list, ",")
	if len(items) > MaxPatterns {
		return nil, fmt.Errorf("%d patterns: at most %d", len(items), MaxPatterns)
	}
	out := make([]Pattern, 0, len(items))
	for i, it := range items {
		p, err := ParseOne(strings.TrimSpace(it))
		if err != nil {
			return nil, fmt.Errorf("pattern %d: %w", i+1, err)
		}
		out = append(out, p)
	}
	return out, nil
}

// ParseOne parses one pattern.
func ParseOne(s string) (Pattern, error) {
	switch {
	case s == "":
		return Pattern{}, fmt.Errorf("empty pattern (two commas in a row, or a comma at an end?)")
	case len(s) > MaxPatternLength:
		return Pattern{}, fmt.Errorf("pattern %.40q… is longer than %d bytes", s, MaxPatternLength)
	case !utf8.ValidString(s):
		return Pattern{}, fmt.Errorf("pattern %q is not valid UTF-8", s)
	}
	if i := strings.IndexFunc(s, unicode.IsControl); i >= 0 {
		return Pattern{}, fmt.Errorf("pattern %q contains a control character", s)
	}
	schema, table, hasDot := strings.Cut(s, ".")
	if !hasDot {
		return Pattern{Schema: s, IsSchema: true}, nil
	}
	if schema == "" {
		return Pattern{}, fmt.Errorf("pattern %q has no schema before the dot (use *.%s for any schema)", s, table)
	}
	if table == "" {
		return Pattern{}, fmt.Errorf("pattern %q has no table after the dot (use %s for the whole schema)", s, schema)
	}
	return Pattern{Schema: schema, Table: table}, nil
}

// Validate checks a list without keeping it.
func Validate(list string) error { _, err := Parse(list); return err }

// Filter selects tables by include and exclude lists.
type Filter struct {
	Include, Exclude []Pattern
}

// NewFilter parses include and exclude lists.
func NewFilter(include, exclude string) (*Filter, error) {
	in, err := Parse(include)
	if err != nil {
		return nil, fmt.Errorf("include: %w", err)
	}
	ex, err := Parse(exclude)
	if err != nil {
		return nil, fmt.Errorf("exclude: %w", err)
	}
	return &Filter{Include: in, Exclude: ex}, nil
}

// Empty reports whether the filter selects everything.
func (f *Filter) Empty() bool { return f == nil || len(f.Include) == 0 && len(f.Exclude) == 0 }

// SchemaLevel reports whether every pattern (include and exclude) is a
// schema pattern.
func (f *Filter) SchemaLevel() bool {
	if f == nil {
		return true
	}
	for _, p := range append(append([]Pattern(nil), f.Include...), f.Exclude...) {
		if !p.IsSchema {
			return false
		}
	}
	return true
}

// Match reports whether table schema.table is selected.
func (f *Filter) Match(schema, table string) bool {
	if f == nil {
		return true
	}
	for _, p := range f.Exclude {
		if p.Match(schema, table) {
			return false
		}
	}
	if len(f.Include) == 0 {
		return true
	}
	for _, p := range f.Include {
		if p.Match(schema, table) {
			return true
		}
	}
	return false
}

// Match reports whether the pattern matches table schema.table.
func (p Pattern) Match(schema, table string) bool {
	if !Glob(p.Schema, schema) {
		return false
	}
	return p.IsSchema || Glob(p.Table, table)
}

// Glob matches s against pattern (`*` any run, `?` one character, by rune).
// It runs in O(len(pattern)·len(s)) time: no backtracking blow-up.
func Glob(pattern, s string) bool {
	pr, sr := []rune(pattern), []rune(s)
	pi, si := 0, 0
	star, mark := -1, 0
	for si < len(sr) {
		switch {
		case pi < len(pr) && pr[pi] == '*':
			star, mark = pi, si
			pi++
		case pi < len(pr) && (pr[pi] == '?' || pr[pi] == sr[si]):
			pi++
			si++
		case star >= 0:
			pi = star + 1
			mark++
			si = mark
		default:
			return false
		}
	}
	for pi < len(pr) && pr[pi] == '*' {
		pi++
	}
	return pi == len(pr)
}
