package migrate

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/go-sql-driver/mysql"

	"cairn.dev/agent/contract"
	"cairn.dev/agent/internal/engine"
	"cairn.dev/agent/internal/inventory"
	"cairn.dev/agent/internal/naming"
)

func (mig *Migration) myTargetChecks(ctx context.Context, tc engine.Conn, p *problems, res *contract.MigrationResult) error {
	pool, c, err := inventory.ConnectMySQL(ctx, tc, tc.Database)
	if err != nil {
		var me *mysql.MySQLError
		if errors.As(err, &me) && me.Number == 1049 || strings.Contains(err.Error(), "Error 1049") {
			// Unknown database: copy creates it.
			pool, c, err = inventory.ConnectMySQL(ctx, tc, "")
			if err != nil {
				return fmt.Errorf("target: %w", err)
			}
			defer pool.Close()
			defer c.Close()
			return c.QueryRowContext(ctx, "SELECT VERSION()").Scan(&res.TargetVersion)
		}
		return fmt.Errorf("target: %w", err)
	}
	defer pool.Close()
	defer c.Close()
	if err := c.QueryRowContext(ctx, "SELECT VERSION()").Scan(&res.TargetVersion); err != nil {
		return fmt.Errorf("target version: %w", err)
	}
	// Probe tables of a precheck killed mid-probe.
	rows, err := c.QueryContext(ctx, `SELECT table_name FROM information_schema.tables
WHERE table_schema = DATABASE() AND table_name LIKE 'cairn\_precheck\_%'`)
	if err != nil {
		return fmt.Errorf("target: %w", err)
	}
	var leftovers []string
	for rows.Next() {
		var n string
		if rows.Scan(&n) == nil {
			leftovers = append(leftovers, n)
		}
	}
	rows.Close()
	for _, n := range leftovers {
		if _, err := c.ExecContext(ctx, "DROP TABLE IF EXISTS "+inventory.QuoteIdent(n)); err != nil {
			return fmt.Errorf("target: drop leftover probe table %s: %w", n, err)
		}
	}
	if err := mig.existingTargetTables(ctx, &inventory.MySQL{Conn: tc, DB: pool, C: c}, p); err != nil {
		return err
	}
	// Can the target user create, fill and drop a table? (MySQL DDL is not
	// transactional: the probe table is dropped at once.)
	probe := "cairn_precheck_" + naming.NewToken()
	_, err = c.ExecContext(ctx, "CREATE TABLE "+inventory.QuoteIdent(probe)+" (id INT)")
	if err == nil {
		_, err = c.ExecContext(ctx, "INSERT INTO "+inventory.QuoteIdent(probe)+" VALUES (1)")
		if _, derr := c.ExecContext(ctx, "DROP TABLE IF EXISTS "+inventory.QuoteIdent(probe)); err == nil {
			err = derr
		}
	}
	if err != nil {
		p.add("target user %q may not create, fill and drop tables in database %q: %v", tc.User, tc.Database, err)
	}
	return nil
}
