package checks

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"

	"cairn.dev/agent/internal/engine"
	"cairn.dev/agent/internal/inventory"
)

// MySQL runs checks in a MySQL or MariaDB database through the protocol,
// never through the mysql client: each check on a connection of its own
// without multi-statements, the session's transactions read-only (SET
// SESSION TRANSACTION READ ONLY, so even a statement that commits
// implicitly stays read-only) and the check inside START TRANSACTION READ
// ONLY, with a statement time limit (MariaDB max_statement_time, MySQL
// max_execution_time) and, past it, KILL QUERY from a second connection.
// Only a statement that starts as a query is sent (see guard). After it the
// session must still be read-only; the transaction is always rolled back.
type MySQL struct {
	Conn    engine.Conn
	Timeout time.Duration
}

func (m *MySQL) QueryValue(ctx context.Context, query string) (string, error) {
	if err := guard("mysql", query); err != nil {
		return "", err
	}
	timeout := m.Timeout
	if timeout <= 0 {
		timeout = DefaultTimeout
	}
	pool, conn, err := inventory.ConnectMySQL(ctx, m.Conn, m.Conn.Database)
	if err != nil {
		return "", err
	}
	defer pool.Close()
	defer conn.Close()

	var id int64
	if err := conn.QueryRowContext(ctx, "SELECT CONNECTION_ID()").Scan(&id); err != nil {
		return "", fmt.Errorf("opening the read-only transaction: %w", err)
	}
	// MariaDB limits every statement (seconds); MySQL limits SELECT (ms).
	if _, err := conn.ExecContext(ctx, fmt.Sprintf("SET SESSION max_statement_time = %.3f", timeout.Seconds())); err != nil {
		if _, err := conn.ExecContext(ctx, fmt.Sprintf("SET SESSION max_execution_time = %d", timeout.Milliseconds())); err != nil {
			return "", fmt.Errorf("setting the check's time limit: %w", err)
		}
	}
	roVar := ""
	for _, v := range []string{"@@session.transaction_read_only", "@@session.tx_read_only"} {
		if _, err := conn.ExecContext(ctx, "SELECT "+v); err == nil {
			roVar = v
			break
		}
	}
	if roVar == "" {
		return "", errors.New("opening the read-only transaction: the server has neither transaction_read_only nor tx_read_only")
	}
	for _, s := range []string{"SET SESSION TRANSACTION READ ONLY", "START TRANSACTION READ ONLY"} {
		if _, err := conn.ExecContext(ctx, s); err != nil {
			return "", fmt.Errorf("opening the read-only transaction: %s: %w", s, err)
		}
	}
	if err := myReadOnly(ctx, conn, roVar); err != nil {
		return "", fmt.Errorf("opening the read-only transaction: %w", err)
	}

	qctx, cancel := context.WithTimeout(ctx, timeout+grace)
	defer cancel()
	value, err := myOneValue(qctx, conn, query, func() { m.killQuery(id) })
	if err != nil {
		// Whatever is still running on the server is stopped.
		m.killQuery(id)
		if qctx.Err() != nil && ctx.Err() == nil {
			return "", fmt.Errorf("the query ran longer than %s and was killed", timeout)
		}
		return "", err
	}
	if err := myReadOnly(ctx, conn, roVar); err != nil {
		return "", fmt.Errorf("refused: after the statement, %w; its value is not trusted", err)
	}
	if _, err := conn.ExecContext(ctx, "ROLLBACK"); err != nil {
		return "", fmt.Errorf("rolling back the check's transaction: %w", err)
	}
	return value, nil
}

// myOneValue runs query (text protocol, one statement) and returns its one
// value; a second row stops the query (kill) before the rest is drained.
func myOneValue(ctx context.Context, conn *sql.Conn, query string, kill func()) (string, error) {
	rows, err := conn.QueryContext(ctx, query)
	if err != nil {
		return "", err
	}
	defer rows.Close()
	cols, err := rows.Columns()
	if err != nil {
		return "", err
	}
	switch {
	case len(cols) == 0:
		return "", errors.New("refused: the statement returns no rows; a check is one query (SELECT …) returning one row with one column")
	case len(cols) > 1:
		return "", fmt.Errorf("the query returns %d columns; want one row with one column", len(cols))
	}
	if !rows.Next() {
		if err := rows.Err(); err != nil {
			return "", err
		}
		return "", errors.New("the query returned no row; want one row with one column")
	}
	var v sql.NullString
	if err := rows.Scan(&v); err != nil {
		return "", err
	}
	if rows.Next() {
		kill()
		return "", errors.New("the query returned more than one row; want one row with one column")
	}
	if err := rows.Err(); err != nil {
		return "", err
	}
	if !v.Valid {
		return "NULL", nil
	}
	return v.String, nil
}

// myReadOnly checks that the session's transactions are read-only and
// (MariaDB, which says) that the transaction is still open.
func myReadOnly(ctx context.Context, conn *sql.Conn, roVar string) error {
	var ro int
	if err := conn.QueryRowContext(ctx, "SELECT "+roVar).Scan(&ro); err != nil {
		return err
	}
	if ro != 1 {
		return errors.New("the session is not read-only")
	}
	var in int
	err := conn.QueryRowContext(ctx, "SELECT @@in_transaction").Scan(&in)
	if err == nil && in != 1 {
		return errors.New("the read-only transaction was ended")
	}
	return nil
}

// killQuery stops what connection id is running, from a second connection.
func (m *MySQL) killQuery(id int64) {
	ctx, cancel := context.WithTimeout(context.Background(), grace)
	defer cancel()
	pool, conn, err := inventory.ConnectMySQL(ctx, m.Conn, "")
	if err != nil {
		return
	}
	defer pool.Close()
	defer conn.Close()
	// An error (the query has ended: unknown thread) leaves nothing to stop.
	_, _ = conn.ExecContext(ctx, fmt.Sprintf("KILL QUERY %d", id))
}
