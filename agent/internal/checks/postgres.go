package checks

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgproto3"

	"cairn.dev/agent/internal/engine"
	"cairn.dev/agent/internal/inventory"
)

// MaxValueBody bounds what the server may send for the one row of a check
// (a longer value fails the check; the agent never holds more in memory).
const MaxValueBody = 1 << 20

// DefaultTimeout is how long one check may run by default.
const DefaultTimeout = 10 * time.Minute

// grace is how long past the statement timeout the agent waits for the
// server's own cancellation before it closes the connection.
const grace = 15 * time.Second

// Postgres runs checks in a PostgreSQL database through the protocol,
// never through psql: each check on a connection of its own, in a
// transaction opened READ ONLY and sealed by a first query (PostgreSQL
// refuses to make a transaction read-write once it has run a query), with
// statement_timeout set LOCAL. The check's SQL goes through the extended
// protocol (Parse refuses several statements) and is described before it
// runs: only a statement that returns rows, one column, is run. After it,
// the transaction must still be open and read-only; it is always rolled
// back.
type Postgres struct {
	Conn    engine.Conn
	Timeout time.Duration
}

func (p *Postgres) QueryValue(ctx context.Context, sql string) (string, error) {
	if err := guard("postgres", sql); err != nil {
		return "", err
	}
	timeout := p.Timeout
	if timeout <= 0 {
		timeout = DefaultTimeout
	}
	ctx, cancel := context.WithTimeout(ctx, timeout+grace)
	defer cancel()
	conn, err := inventory.ConnectPostgres(ctx, p.Conn, p.Conn.Database)
	if err != nil {
		return "", err
	}
	pc := conn.PgConn()
	// Closing the connection rolls back whatever is left open; it is
	// never reused.
	defer pc.Close(context.Background())

	setup := fmt.Sprintf("SET default_transaction_read_only = on; BEGIN READ ONLY; SET LOCAL statement_timeout = %d; SET LOCAL idle_in_transaction_session_timeout = %d",
		timeout.Milliseconds(), (timeout + grace).Milliseconds())
	if _, err := pc.Exec(ctx, setup).ReadAll(); err != nil {
		return "", fmt.Errorf("opening the read-only transaction: %w", err)
	}
	if err := readOnly(ctx, pc); err != nil {
		return "", fmt.Errorf("opening the read-only transaction: %w", err)
	}

	sd, err := pc.Prepare(ctx, "", sql, nil)
	if err != nil {
		return "", err
	}
	switch {
	case len(sd.Fields) == 0:
		return "", errors.New("refused: the statement returns no rows; a check is one query (SELECT …) returning one row with one column")
	case len(sd.Fields) > 1:
		return "", fmt.Errorf("the query returns %d columns; want one row with one column", len(sd.Fields))
	case len(sd.ParamOIDs) > 0:
		return "", fmt.Errorf("the query has %d parameters ($1 …); a check has none", len(sd.ParamOIDs))
	}

	pc.Frontend().SetMaxBodyLen(MaxValueBody)
	rr := pc.ExecPrepared(ctx, "", nil, nil, []int16{0}) // results as text
	var value string
	rows := 0
	for rr.NextRow() {
		rows++
		if rows > 1 {
			// No more is read: the connection is closed, the statement
			// cancelled with it.
			return "", errors.New("the query returned more than one row; want one row with one column")
		}
		if v := rr.Values()[0]; v == nil {
			value = "NULL"
		} else {
			value = string(v)
		}
	}
	if _, err := rr.Close(); err != nil {
		var big *pgproto3.ExceededMaxBodyLenErr
		if errors.As(err, &big) {
			return "", fmt.Errorf("the query's value is larger than %d bytes", MaxValueBody)
		}
		return "", err
	}
	if rows == 0 {
		return "", errors.New("the query returned no row; want one row with one column")
	}
	// The statement ran; the transaction must be as it was opened.
	if s := pc.TxStatus(); s != 'T' {
		return "", fmt.Errorf("refused: the statement ended the read-only transaction (status %q); its value is not trusted", s)
	}
	if err := readOnly(ctx, pc); err != nil {
		return "", fmt.Errorf("refused: after the statement, %w; its value is not trusted", err)
	}
	if _, err := pc.Exec(ctx, "ROLLBACK").ReadAll(); err != nil {
		return "", fmt.Errorf("rolling back the check's transaction: %w", err)
	}
	return value, nil
}

// readOnly checks that the open transaction is read-only. Being a query,
// it also seals that: PostgreSQL refuses SET transaction_read_only = off
// after a transaction's first query.
func readOnly(ctx context.Context, pc *pgconn.PgConn) error {
	res, err := pc.Exec(ctx, "SELECT current_setting('transaction_read_only')").ReadAll()
	if err != nil {
		return err
	}
	if len(res) != 1 || len(res[0].Rows) != 1 || string(res[0].Rows[0][0]) != "on" {
		return errors.New("the transaction is not read-only")
	}
	return nil
}
