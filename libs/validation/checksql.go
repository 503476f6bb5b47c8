package validation

import (
	"fmt"
	"strings"

	"k8s.io/apimachinery/pkg/util/validation/field"

	cairnv1 "cairn.dev/apis/meta/v1"
)

// CheckSQL checks the SQL of a verification check (RestoreJob
// spec.checks[].sql, ProtectionPlan spec.verification.checks[].sql) at p:
// one query, as the engine reads it. It refuses what is obviously not a
// query — empty, several statements (a ";" that is not the last thing
// outside quotes and comments), a client command (a backslash outside a
// string: psql's and mysql's \! runs a shell), MySQL's executable comments
// (/*! … */), an unterminated string or comment, or a first word other
// than SELECT, WITH, VALUES or TABLE (PostgreSQL: also SHOW).
//
// This is the fast guard at admission. The agent is the authority: it runs
// a check through the database protocol, one statement, in a read-only
// transaction (agent/README.md, "Checks").
func CheckSQL(engine cairnv1.DatabaseEngine, sql string, p *field.Path) field.ErrorList {
	if msg := checkSQL(engine, sql); msg != "" {
		shown := sql
		if len(shown) > 120 {
			shown = shown[:120] + "…"
		}
		return field.ErrorList{field.Invalid(p, shown, msg)}
	}
	return nil
}

// checkSQL returns why sql is not one query for engine, or "".
func checkSQL(engine cairnv1.DatabaseEngine, sql string) string {
	my := engine == cairnv1.MySQLEngine
	s := sql
	if strings.IndexByte(s, 0) >= 0 {
		return "contains a NUL character"
	}
	first := ""
	end := -1 // index of the statement's ";", once seen
	prevWord := ""
	prevWordEnd := -1
	for i := 0; i < len(s); {
		c := s[i]
		switch {
		case c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v':
			i++
			continue
		case c == '-' && i+1 < len(s) && s[i+1] == '-' && (!my || i+2 == len(s) || s[i+2] <= ' '),
			my && c == '#':
			for i < len(s) && s[i] != '\n' {
				i++
			}
			continue
		case c == '/' && i+1 < len(s) && s[i+1] == '*':
			if my && i+2 < len(s) && (s[i+2] == '!' || (s[i+2] == 'M' || s[i+2] == 'm') && i+3 < len(s) && s[i+3] == '!') {
				return "executable comments (/*! … */) run as SQL; a check cannot use them"
			}
			j, ok := blockComment(s, i, !my)
			if !ok {
				return "a /* comment is not closed"
			}
			i = j
			continue
		}
		if end >= 0 {
			return "several statements: a check is one query; only a final \";\" is allowed"
		}
		switch {
		case c == ';':
			if first == "" {
				return "is empty before its \";\": a check is one query, e.g. SELECT count(*) FROM orders"
			}
			end = i
			i++
		case c == '\\':
			return "a backslash outside a string is a client command (psql or mysql, e.g. \\! runs a shell), not SQL; a check is one query"
		case c == '\'':
			escapes := my || prevWordEnd == i && strings.EqualFold(prevWord, "e")
			j, ok := quoted(s, i, '\'', escapes)
			if !ok {
				return "a string (') is not closed"
			}
			i = j
		case c == '"':
			j, ok := quoted(s, i, '"', my)
			if !ok {
				return "a quoted name or string (\") is not closed"
			}
			i = j
		case my && c == '`':
			j, ok := quoted(s, i, '`', false)
			if !ok {
				return "a quoted name (`) is not closed"
			}
			i = j
		case !my && c == '$' && prevWordEnd != i:
			if j, ok, isQuote := dollarQuoted(s, i); isQuote {
				if !ok {
					return "a dollar-quoted string ($…$) is not closed"
				}
				i = j
			} else {
				i++
			}
		case isWordByte(c):
			j := i
			for j < len(s) && (isWordByte(s[j]) || c >= '0' && c <= '9' && s[j] == '.') {
				j++
			}
			prevWord, prevWordEnd = s[i:j], j
			if first == "" {
				first = strings.ToLower(prevWord)
			}
			i = j
			continue
		case c == '(' && first == "":
			i++
			continue
		default:
			if first == "" {
				return fmt.Sprintf("starts with %q: a check is one query, starting with SELECT, WITH, VALUES or TABLE", string(c))
			}
			i++
		}
		prevWordEnd = -1
	}
	switch {
	case first == "":
		return "is empty: a check is one query, e.g. SELECT count(*) FROM orders"
	case first == "select" || first == "with" || first == "values" || first == "table" || !my && first == "show":
		return ""
	}
	return fmt.Sprintf("starts with %s: a check is one query (SELECT, WITH, VALUES or TABLE), run read-only", strings.ToUpper(first))
}

func isWordByte(b byte) bool {
	return b == '_' || b == '$' || b >= '0' && b <= '9' || b >= 'a' && b <= 'z' || b >= 'A' && b <= 'Z' || b >= 0x80
}

// blockComment returns the index after the /* comment starting at i;
// PostgreSQL's nest.
func blockComment(s string, i int, nest bool) (int, bool) {
	depth := 0
	for i < len(s)-1 {
		switch {
		case s[i] == '/' && s[i+1] == '*':
			if depth > 0 && !nest {
				i++
				continue
			}
			depth++
			i += 2
		case s[i] == '*' && s[i+1] == '/':
			depth--
			i += 2
			if depth == 0 {
				return i, true
			}
		default:
			i++
		}
	}
	return len(s), false
}

// quoted returns the index after the quoted text starting at i: the quote
// doubled stands for itself, and with escapes a backslash escapes the next
// byte.
func quoted(s string, i int, q byte, escapes bool) (int, bool) {
	for i++; i < len(s); i++ {
		switch {
		case escapes && s[i] == '\\':
			i++
		case s[i] == q:
			if i+1 < len(s) && s[i+1] == q {
				i++
				continue
			}
			return i + 1, true
		}
	}
	return len(s), false
}

// dollarQuoted reads a PostgreSQL $tag$…$tag$ string at i. isQuote is false
// when the $ does not open one (e.g. $1).
func dollarQuoted(s string, i int) (end int, ok, isQuote bool) {
	j := i + 1
	for j < len(s) && s[j] != '$' {
		b := s[j]
		if !(b == '_' || b >= 'a' && b <= 'z' || b >= 'A' && b <= 'Z' || b >= 0x80 || j > i+1 && b >= '0' && b <= '9') {
			return 0, false, false
		}
		j++
	}
	if j == len(s) {
		return 0, false, false
	}
	tag := s[i : j+1]
	k := strings.Index(s[j+1:], tag)
	if k < 0 {
		return len(s), false, true
	}
	return j + 1 + k + len(tag), true, true
}
