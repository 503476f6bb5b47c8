package pitr

import (
	"errors"
	"io"
	"strings"
	"testing"
)

// The replay's statement check reads the decoder's output as the client
// splits it: what a string or a comment holds is not a statement, what a
// versioned comment holds is; every statement that names another schema,
// users or grants is refused, the source's own are applied.
func TestStatementPolicy(t *testing.T) {
	p := StatementPolicy{From: "shop", To: "shop_copy", Live: map[string]bool{"audit": true, "shop_copy": true, "mysql": true}}
	head := "/*!40019 SET @@session.max_insert_delayed_threads=0*/;\nDELIMITER /*!*/;\n# at 4\n#231207 18:00:00 server id 1  end_log_pos 256 CRC32 0x1 \tGTID 0-1-7 ddl\n"
	for _, tc := range []struct {
		stmt string
		err  error // nil: applied
	}{
		{"INSERT INTO orders VALUES (1, 'audit.events; TRUNCATE audit.t')", nil},
		{"INSERT INTO orders VALUES ('it''s /*!*/; TRUNCATE audit.t -- ')", nil},
		{"INSERT INTO orders VALUES ('a\\'/*!*/; TRUNCATE audit.t')", nil},
		{"# TRUNCATE audit.t\nINSERT INTO orders VALUES (1)", nil},
		{"/* audit.t */ ALTER TABLE orders ADD COLUMN c INT", nil},
		{"UPDATE orders o SET o.note = 'x' WHERE o.id = 1", nil},
		{"CREATE DEFINER=`root`@`localhost` TRIGGER tr BEFORE INSERT ON orders FOR EACH ROW SET NEW.qty = 1", nil},
		{"use `shop_copy`", nil},
		{"BINLOG '\nAAAA\n'", nil},
		{"TRUNCATE audit.t", ErrOutsideSource},
		{"TRUNCATE `audit` . `t`", ErrOutsideSource},
		{"TRUNCATE \"audit\".t", ErrOutsideSource},
		{"/*!40000 TRUNCATE audit.t */", ErrOutsideSource},
		{"INSERT INTO orders SELECT * FROM mysql.user", ErrOutsideSource},
		{"DROP TABLE orders, audit.events", ErrOutsideSource},
		{"RENAME TABLE orders TO shop_copy.orders", ErrOutsideSource},
		{"TRUNCATE shop.orders", ErrNamesSource},
		{"GRANT ALL ON *.* TO 'x'@'%'", ErrOutsideSource},
		{"CREATE OR REPLACE USER 'x'@'%'", ErrOutsideSource},
		{"ALTER USER 'root'@'%' IDENTIFIED BY 'x'", ErrOutsideSource},
		{"SET PASSWORD FOR 'root'@'%' = PASSWORD('x')", ErrOutsideSource},
		{"DROP DATABASE IF EXISTS audit", ErrOutsideSource},
		{"CREATE FUNCTION f RETURNS INTEGER SONAME 'evil.so'", ErrOutsideSource},
		{"INSTALL SONAME 'evil'", ErrOutsideSource},
		{"LOAD DATA LOCAL INFILE '/tmp/x' INTO TABLE orders", ErrOutsideSource},
		{"use `audit`", ErrOutsideSource},
		{"CREATE DEFINER=`root`@`%` EVENT e ON SCHEDULE EVERY 1 MINUTE DO DELETE FROM orders", ErrOutsideSource},
		{"CREATE TABLE f (id INT) ENGINE=FEDERATED CONNECTION='mysql://u@h/audit/t'", ErrOutsideSource},
		{"CREATE TABLE f (id INT) ENGINE = CONNECT", ErrOutsideSource},
		{"CREATE TABLE f (id INT) DATA DIRECTORY = '/var/lib/mysql/audit'", ErrOutsideSource},
		{"EXECUTE IMMEDIATE CONCAT('TRUNCATE au', 'dit.t')", ErrOutsideSource},
		{"CREATE TABLE user_events (id INT)", nil},
		{"CREATE OR REPLACE ALGORITHM=MERGE DEFINER=`a`@`%` SQL SECURITY INVOKER VIEW v AS SELECT id FROM orders", nil},
		{"/*!99999 \\! sh -c id */", ErrOutsideSource},
	} {
		err := copyChecked(io.Discard, strings.NewReader(head+tc.stmt+"\n/*!*/;\nDELIMITER ;\n"), p.Check)
		switch {
		case tc.err == nil && err != nil:
			t.Errorf("%q refused: %v", tc.stmt, err)
		case tc.err != nil && !errors.Is(err, tc.err):
			t.Errorf("%q: %v, want %v", tc.stmt, err, tc.err)
		case tc.err != nil && !strings.Contains(err.Error(), "GTID 0-1-7") && !strings.Contains(err.Error(), "at position 4"):
			t.Errorf("%q: the refusal does not name the event: %v", tc.stmt, err)
		}
	}
	// Under NO_BACKSLASH_ESCAPES a backslash ends nothing: the quote after
	// it closes the string, and what follows is a statement.
	nbe := head + "SET @@session.sql_mode=1048576/*!*/;\nINSERT INTO orders VALUES ('a\\')/*!*/;\nTRUNCATE audit.t\n/*!*/;\n"
	if err := copyChecked(io.Discard, strings.NewReader(nbe), p.Check); !errors.Is(err, ErrOutsideSource) {
		t.Errorf("a TRUNCATE after a string ending in a backslash under NO_BACKSLASH_ESCAPES: %v", err)
	}
	// A DELIMITER line other than the decoder's (after blanks too) is a
	// client command.
	for _, d := range []string{"DELIMITER ;;\n", "  delimiter $$\n"} {
		if err := copyChecked(io.Discard, strings.NewReader(head+d), p.Check); !errors.Is(err, ErrOutsideSource) {
			t.Errorf("%q in the decoded log: %v, want it refused", d, err)
		}
	}
	// A source GTID line is dropped, the rest sent as decoded.
	var out strings.Builder
	in := head + "/*M!100001 SET @@session.gtid_seq_no=7*//*!*/;\nINSERT INTO orders VALUES (1)\n/*!*/;\n"
	if err := copyChecked(&out, strings.NewReader(in), p.Check); err != nil || strings.Contains(out.String(), "gtid_seq_no") || !strings.Contains(out.String(), "INSERT INTO orders VALUES (1)\n/*!*/;") {
		t.Errorf("copied %q (%v)", out.String(), err)
	}
}
