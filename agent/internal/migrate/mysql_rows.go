package migrate

import (
	"context"
	"database/sql"
	"encoding/hex"
	"errors"
	"fmt"
	"strings"

	"github.com/go-sql-driver/mysql"

	"cairn.dev/agent/internal/engine"
	"cairn.dev/agent/internal/inventory"
)

// myConnectTarget connects to the target with the driver's packet limit
// taken from the server (max_allowed_packet) rather than the driver's
// default 64 MiB: a row the server accepts is never refused by the client.
func myConnectTarget(ctx context.Context, tc engine.Conn) (*sql.DB, *sql.Conn, error) {
	cfg := inventory.MySQLConfig(tc, tc.Database)
	cfg.MaxAllowedPacket = 0
	connector, err := mysql.NewConnector(cfg)
	if err != nil {
		return nil, nil, errors.New(engine.Redact(err.Error(), tc.Password))
	}
	pool := sql.OpenDB(connector)
	c, err := pool.Conn(ctx)
	if err == nil {
		err = c.PingContext(ctx)
	}
	if err != nil {
		pool.Close()
		return nil, nil, fmt.Errorf("connect to MySQL %s:%d database %q as %q: %s", tc.Host, tc.Port, tc.Database, tc.User, engine.Redact(err.Error(), tc.Password))
	}
	return pool, c, nil
}

// myStatementMax bounds one INSERT statement (rows larger than it go one
// per statement); myCommitBytes is how much is inserted per transaction.
const (
	myStatementMax = 1 << 20
	myCommitBytes  = 64 << 20
)

// myTargetSQLMode is the target session's sql_mode during the copy: no
// automatic value for an explicit 0 in an AUTO_INCREMENT column (as a
// mysqldump file sets), and strict: a value that does not fit its target
// column (too long, out of range, not valid in the column's character set)
// fails the copy instead of being truncated or replaced with a warning.
const myTargetSQLMode = "NO_AUTO_VALUE_ON_ZERO,STRICT_ALL_TABLES"

// myPrepareTarget sets a target session up as a mysqldump file does
// (foreign key and unique checks off, no automatic value for an explicit
// 0 in an AUTO_INCREMENT column), in strict mode (myTargetSQLMode), and
// returns the statement size limit.
func myPrepareTarget(ctx context.Context, t *sql.Conn) (int, error) {
	for _, s := range []string{
		"SET SESSION foreign_key_checks = 0",
		"SET SESSION unique_checks = 0",
		"SET SESSION sql_mode = '" + myTargetSQLMode + "'",
	} {
		if _, err := t.ExecContext(ctx, s); err != nil {
			return 0, fmt.Errorf("%s: %w", s, err)
		}
	}
	var packet int64
	if err := t.QueryRowContext(ctx, "SELECT @@max_allowed_packet").Scan(&packet); err != nil {
		return 0, err
	}
	return int(min(int64(myStatementMax), max(packet/2, 16<<10))), nil
}

// myColumn is how one column's values are written into an INSERT.
type myColumn struct {
	name string
	kind int
	// float: a FLOAT or DOUBLE column, read as a DOUBLE expression: its
	// own text (6 significant digits for a FLOAT, D decimals for a
	// FLOAT(M,D)) would round the value; the shortest text of the DOUBLE
	// reads back as exactly the value stored.
	float bool
}

const (
	myQuoted  = iota // '…' with backslash escapes (dates, times, UTF-8 text, JSON, …)
	myNumber         // as printed, when it is a number
	myHex            // X'…': binary strings, BIT, spatial
	myCharset        // _charset X'…': text in a character set other than UTF-8
)

var myNumberTypes = map[string]bool{
	"tinyint": true, "smallint": true, "mediumint": true, "int": true, "integer": true, "bigint": true,
	"decimal": true, "numeric": true, "float": true, "double": true, "real": true, "year": true,
}

var myBinaryTypes = map[string]bool{
	"binary": true, "varbinary": true, "tinyblob": true, "blob": true, "mediumblob": true, "longblob": true, "bit": true,
	"geometry": true, "point": true, "linestring": true, "polygon": true, "multipoint": true,
	"multilinestring": true, "multipolygon": true, "geometrycollection": true, "geomcollection": true,
}

// myColumns lists the columns of table that hold data (generated columns
// are computed by the target), invisible ones included.
func myColumns(ctx context.Context, c *sql.Conn, table string) ([]myColumn, []string, error) {
	rows, err := c.QueryContext(ctx, `SELECT column_name, data_type, coalesce(character_set_name, '')
FROM information_schema.columns
WHERE table_schema = DATABASE() AND table_name = ? AND coalesce(generation_expression, '') = ''
ORDER BY ordinal_position`, table)
	if err != nil {
		return nil, nil, fmt.Errorf("columns: %w", err)
	}
	defer rows.Close()
	var cols []myColumn
	var charsets []string
	for rows.Next() {
		var name, typ, cs []byte // character_set_results is binary
		if err := rows.Scan(&name, &typ, &cs); err != nil {
			return nil, nil, err
		}
		t, charset := strings.ToLower(string(typ)), strings.ToLower(string(cs))
		col := myColumn{name: string(name), kind: myQuoted}
		switch {
		case myNumberTypes[t]:
			col.kind = myNumber
			col.float = t == "float" || t == "double" || t == "real"
		case myBinaryTypes[t] || charset == "binary":
			col.kind = myHex
		case charset != "" && !strings.HasPrefix(charset, "utf8"):
			col.kind = myCharset
		}
		cols = append(cols, col)
		charsets = append(charsets, charset)
	}
	if err := rows.Err(); err != nil {
		return nil, nil, err
	}
	if len(cols) == 0 {
		return nil, nil, errors.New("no columns to copy")
	}
	return cols, charsets, nil
}

// myCopyTable streams table from s (inside its snapshot transaction) into
// t as multi-row INSERTs of up to maxStmt bytes, committed every
// myCommitBytes; the source is read while the target executes the
// previous statement. It returns the bytes of values read.
func myCopyTable(ctx context.Context, s, t *sql.Conn, table string, maxStmt int) (int64, error) {
	cols, charsets, err := myColumns(ctx, s, table)
	if err != nil {
		return 0, err
	}
	names := make([]string, len(cols))
	reads := make([]string, len(cols))
	for i, c := range cols {
		names[i] = inventory.QuoteIdent(c.name)
		reads[i] = names[i]
		if c.float {
			reads[i] = "(" + names[i] + " + 0e0)"
		}
	}
	list := strings.Join(names, ",")
	prefix := "INSERT INTO " + inventory.QuoteIdent(table) + " (" + list + ") VALUES "
	// A failed target cancels the source's query (the driver then closes
	// that connection rather than read the rest of the table).
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	rows, err := s.QueryContext(ctx, "SELECT "+strings.Join(reads, ",")+" FROM "+inventory.QuoteIdent(table))
	if err != nil {
		return 0, fmt.Errorf("source: %w", err)
	}
	defer rows.Close()
	stmts := make(chan []byte, 2)
	applied := make(chan error, 1)
	go func() {
		err := myApply(ctx, t, stmts)
		if err != nil {
			cancel(err)
		}
		applied <- err
	}()
	var n int64
	vals := make([]sql.RawBytes, len(cols))
	ptrs := make([]any, len(cols))
	for i := range vals {
		ptrs[i] = &vals[i]
	}
	buf := make([]byte, 0, maxStmt+maxStmt/4)
	send := func() bool {
		select {
		case stmts <- buf:
			buf = make([]byte, 0, maxStmt+maxStmt/4)
			return true
		case <-ctx.Done():
			return false
		}
	}
	var readErr error
	for rows.Next() {
		if err := rows.Scan(ptrs...); err != nil {
			readErr = err
			break
		}
		if len(buf) == 0 {
			buf = append(buf, prefix...)
		} else {
			buf = append(buf, ',')
		}
		buf = append(buf, '(')
		for i, v := range vals {
			if i > 0 {
				buf = append(buf, ',')
			}
			n += int64(len(v))
			buf = appendMyValue(buf, cols[i].kind, charsets[i], v)
		}
		buf = append(buf, ')')
		if len(buf) >= maxStmt && !send() {
			break
		}
	}
	if readErr == nil {
		readErr = rows.Err()
	}
	if readErr == nil && len(buf) > 0 && ctx.Err() == nil {
		send()
	}
	close(stmts)
	applyErr := <-applied
	if applyErr != nil {
		return n, fmt.Errorf("target: %w", applyErr)
	}
	if readErr != nil {
		return n, fmt.Errorf("source: %w", readErr)
	}
	return n, context.Cause(ctx)
}

// myApply executes the statements in transactions of about myCommitBytes.
func myApply(ctx context.Context, t *sql.Conn, stmts <-chan []byte) error {
	fail := func(err error) error {
		t.ExecContext(context.WithoutCancel(ctx), "ROLLBACK")
		for range stmts {
		}
		return err
	}
	open := false
	pending := 0
	for stmt := range stmts {
		if !open {
			if _, err := t.ExecContext(ctx, "BEGIN"); err != nil {
				return fail(err)
			}
			open = true
		}
		if _, err := t.ExecContext(ctx, string(stmt)); err != nil {
			return fail(err)
		}
		pending += len(stmt)
		if pending >= myCommitBytes {
			if _, err := t.ExecContext(ctx, "COMMIT"); err != nil {
				return fail(err)
			}
			open, pending = false, 0
		}
	}
	if open {
		if _, err := t.ExecContext(ctx, "COMMIT"); err != nil {
			return fail(err)
		}
	}
	return nil
}

// appendMyValue appends v as an SQL literal of its column's kind.
func appendMyValue(buf []byte, kind int, charset string, v sql.RawBytes) []byte {
	if v == nil {
		return append(buf, "NULL"...)
	}
	switch kind {
	case myNumber:
		if isMyNumber(v) {
			return append(buf, v...)
		}
	case myHex:
		return appendHex(append(buf, 'X'), v)
	case myCharset:
		buf = append(append(append(buf, '_'), charset...), " X"...)
		return appendHex(buf, v)
	}
	return appendQuoted(buf, v)
}

func isMyNumber(v []byte) bool {
	if len(v) == 0 {
		return false
	}
	for _, c := range v {
		if !('0' <= c && c <= '9' || c == '-' || c == '+' || c == '.' || c == 'e' || c == 'E') {
			return false
		}
	}
	return true
}

func appendHex(buf, v []byte) []byte {
	buf = append(buf, '\'')
	buf = hex.AppendEncode(buf, v)
	return append(buf, '\'')
}

// appendQuoted quotes v as mysql_real_escape_string does (the session's
// sql_mode has no NO_BACKSLASH_ESCAPES: myPrepareTarget sets it).
func appendQuoted(buf, v []byte) []byte {
	buf = append(buf, '\'')
	for _, c := range v {
		switch c {
		case 0:
			buf = append(buf, '\\', '0')
		case '\n':
			buf = append(buf, '\\', 'n')
		case '\r':
			buf = append(buf, '\\', 'r')
		case '\\':
			buf = append(buf, '\\', '\\')
		case '\'':
			buf = append(buf, '\\', '\'')
		case 0x1a:
			buf = append(buf, '\\', 'Z')
		default:
			buf = append(buf, c)
		}
	}
	return append(buf, '\'')
}
