package checks

import (
	"fmt"
	"strings"
)

// The guards here refuse, before anything is sent to the server, what the
// protocol and the read-only transaction do not stop on their own. They
// are deliberately coarse: a word is refused wherever it appears (in a
// string or a comment too), so no quoting or nesting hides it. A check
// needs none of these words; a false refusal costs a rewritten check,
// a miss could cost data.

// pgRefused are PostgreSQL functions that act outside the transaction, so
// a read-only transaction does not stop them (verified against PostgreSQL
// 15: lo_export writes a server file, the slot functions create a slot
// that outlives the rollback), and the functions that run SQL given as a
// string (which would hide the others). Most need a privileged role;
// credentials without superuser or REPLICATION need none of this list.
var pgRefused = []string{
	// files and programs on the database server
	"lo_export", "lo_import", "pg_file_write", "pg_file_rename", "pg_file_unlink", "pg_file_sync",
	// other connections (extensions)
	"dblink", "dblink_exec", "dblink_connect", "dblink_connect_u", "dblink_send_query", "dblink_open",
	// replication slots and the server itself
	"pg_create_logical_replication_slot", "pg_create_physical_replication_slot", "pg_copy_logical_replication_slot",
	"pg_copy_physical_replication_slot", "pg_drop_replication_slot", "pg_replication_slot_advance",
	"pg_logical_slot_get_changes", "pg_logical_slot_get_binary_changes", "pg_logical_emit_message",
	"pg_replication_origin_create", "pg_replication_origin_drop", "pg_replication_origin_advance",
	"pg_terminate_backend", "pg_cancel_backend", "pg_reload_conf", "pg_rotate_logfile", "pg_promote",
	"pg_switch_wal", "pg_create_restore_point", "pg_backup_start", "pg_backup_stop", "pg_start_backup", "pg_stop_backup",
	"pg_notify", "pg_stat_reset", "pg_stat_reset_shared", "pg_stat_reset_single_table_counters",
	"pg_stat_reset_single_function_counters", "pg_stat_reset_slru", "pg_stat_reset_replication_slot",
	"pg_import_system_collations", "set_config",
	// SQL given as a string, run by the function
	"query_to_xml", "query_to_xml_and_xmlschema", "query_to_xmlschema", "ts_stat",
}

// myRefused are MySQL/MariaDB words for what a read-only transaction does
// not stop: SELECT … INTO OUTFILE / DUMPFILE writes a server file.
var myRefused = []string{"outfile", "dumpfile"}

// myFirst are the words a MySQL check may start with (after comments and
// opening parentheses): a query, nothing else.
var myFirst = []string{"select", "with", "values", "table"}

// guard refuses sql before it is sent to a server of the engine: a
// statement that is obviously not a query, or that names something the
// read-only transaction does not stop.
func guard(engine, sql string) error {
	if strings.TrimSpace(sql) == "" {
		return fmt.Errorf("refused: the check's SQL is empty")
	}
	if strings.ContainsRune(sql, 0) {
		return fmt.Errorf("refused: the check's SQL contains a NUL character")
	}
	lower := strings.ToLower(sql)
	switch engine {
	case "postgres":
		// U&"…" spells an identifier with escapes, which would hide a name.
		if strings.Contains(lower, `u&"`) || strings.Contains(lower, `u&'`) {
			return fmt.Errorf(`refused: U&"…" / U&'…' (Unicode escapes) are not allowed in a check`)
		}
		if w := firstWord(lower, pgRefused); w != "" {
			return fmt.Errorf("refused: %s acts outside the read-only transaction (or runs SQL given as a string); a check cannot use it", w)
		}
	case "mysql":
		// /*! … */ and /*M! … */ are executed by the server, not comments.
		if strings.Contains(lower, "/*!") || strings.Contains(lower, "/*m!") {
			return fmt.Errorf("refused: executable comments (/*! … */) are not allowed in a check")
		}
		if w := firstWord(lower, myRefused); w != "" {
			return fmt.Errorf("refused: INTO %s writes a file on the database server; a check only reads", strings.ToUpper(w))
		}
		first := leadingWord(lower)
		ok := false
		for _, w := range myFirst {
			ok = ok || first == w
		}
		if !ok {
			return fmt.Errorf("refused: a check is one query (SELECT, WITH, VALUES or TABLE), not %q", first)
		}
	}
	return nil
}

// isWord reports whether b can be part of an identifier.
func isWord(b byte) bool {
	return b == '_' || b == '$' || b >= '0' && b <= '9' || b >= 'a' && b <= 'z' || b >= 'A' && b <= 'Z' || b >= 0x80
}

// firstWord returns the first of words that occurs in s as a whole word.
func firstWord(s string, words []string) string {
	for i := 0; i < len(s); {
		if !isWord(s[i]) {
			i++
			continue
		}
		j := i
		for j < len(s) && isWord(s[j]) {
			j++
		}
		w := s[i:j]
		for _, r := range words {
			if w == r {
				return r
			}
		}
		i = j
	}
	return ""
}

// leadingWord is the first word of a MySQL statement, after white space,
// comments (--, #, /* */) and opening parentheses.
func leadingWord(s string) string {
	for i := 0; i < len(s); {
		switch c := s[i]; {
		case c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v' || c == '(':
			i++
		case c == '#' || strings.HasPrefix(s[i:], "--") && (i+2 == len(s) || s[i+2] <= ' '):
			for i < len(s) && s[i] != '\n' {
				i++
			}
		case strings.HasPrefix(s[i:], "/*"):
			end := strings.Index(s[i+2:], "*/")
			if end < 0 {
				return ""
			}
			i += 2 + end + 2
		default:
			j := i
			for j < len(s) && isWord(s[j]) {
				j++
			}
			if j == i {
				return s[i : i+1]
			}
			return s[i:j]
		}
	}
	return ""
}
