package migrate

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync/atomic"

	"github.com/go-sql-driver/mysql"

	"cairn.dev/agent/contract"
	"cairn.dev/agent/internal/config"
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

// myCopy copies the included tables: Full mode in parallel
// (myCopyParallel); SchemaOnly streams mysqldump --no-data into the mysql
// client on the target. The schema dump drops and recreates each table it
// contains, so a retried copy replaces what an earlier attempt left: no
// duplicate rows.
func (mig *Migration) myCopy(ctx context.Context, sc, tc engine.Conn, res *contract.MigrationResult) error {
	srcEng, tables, err := mig.selectedSourceEngine(ctx, sc)
	if err != nil {
		return err
	}
	tgt, err := engine.New("mysql", tc)
	if err != nil {
		return &config.UsageError{Msg: "target: " + err.Error()}
	}
	if err := tgt.Prepare(ctx); err != nil {
		return fmt.Errorf("prepare target database %q: %w", tc.Database, err)
	}
	mig.log.Info("copy started", "tables", len(tables), "parallel", mig.cfg.Migrate.Parallel)
	if mig.cfg.Migrate.Mode == "Full" {
		return mig.myCopyParallel(ctx, srcEng.(*engine.MySQL), tgt.(*engine.MySQL), tables, res)
	}
	var moved atomic.Int64
	if err := engine.Pipe(ctx, srcEng.Dump, tgt.Restore, &moved); err != nil {
		return err
	}
	res.Tables, res.TablesDone, res.Bytes = len(tables), len(tables), moved.Load()
	return nil
}

// myReadOnly makes the source database read-only: MySQL 8.0.22 and newer
// have a per-schema READ ONLY option; MariaDB has none (only the
// server-wide read_only, which would stop every other database too), so
// the step refuses there rather than do something broader than asked.
// set reports whether the schema was made read-only.
func (mig *Migration) myReadOnly(ctx context.Context, sc engine.Conn, res *contract.MigrationResult) (set bool, err error) {
	m, err := inventory.OpenMySQL(ctx, sc)
	if err != nil {
		return false, fmt.Errorf("source: %w", err)
	}
	defer m.Close()
	v, err := m.Version(ctx)
	if err != nil {
		return false, err
	}
	if strings.Contains(strings.ToLower(v), "mariadb") {
		return false, &config.UsageError{Msg: fmt.Sprintf("source is MariaDB %s, which cannot make one database read-only (only the whole server: read_only); stop the writers yourself and cut over without sourceReadOnly, declaring spec.cutover.writersStopped", v)}
	}
	if _, err := m.C.ExecContext(ctx, "ALTER SCHEMA "+inventory.QuoteIdent(sc.Database)+" READ ONLY = 1"); err != nil {
		return false, fmt.Errorf("make source database %q read-only (needs MySQL 8.0.22 or newer): %w", sc.Database, err)
	}
	rows, err := m.C.QueryContext(ctx, "SELECT id FROM information_schema.processlist WHERE db = DATABASE() AND id <> CONNECTION_ID()")
	if err != nil {
		return true, err
	}
	var ids []int64
	for rows.Next() {
		var id int64
		if err := rows.Scan(&id); err == nil {
			ids = append(ids, id)
		}
	}
	rows.Close()
	ended := 0
	for _, id := range ids {
		if _, err := m.C.ExecContext(ctx, fmt.Sprintf("KILL %d", id)); err == nil {
			ended++
		}
	}
	res.Actions = append(res.Actions,
		fmt.Sprintf("source database %q is read-only (ALTER SCHEMA … READ ONLY = 1)", sc.Database),
		fmt.Sprintf("ended %d other sessions on it", ended))
	return true, nil
}

// myReadOnlyChecks reports, at precheck, a source that cutover's
// sourceReadOnly cannot make read-only: MariaDB (no per-database
// read-only) and MySQL older than 8.0.22.
func myReadOnlyChecks(version string, p *problems) {
	if strings.Contains(strings.ToLower(version), "mariadb") {
		p.add("cutover.sourceReadOnly: the source is MariaDB %s, which has no per-database read-only: leave sourceReadOnly false, stop the writers yourself and set spec.cutover.writersStopped", version)
		return
	}
	var maj, mnr, patch int
	fmt.Sscanf(version, "%d.%d.%d", &maj, &mnr, &patch)
	if maj < 8 || maj == 8 && mnr == 0 && patch < 22 {
		p.add("cutover.sourceReadOnly: the source is MySQL %s; a read-only schema needs MySQL 8.0.22 or newer", version)
	}
}

// copyStep is the direct transfer.
func (mig *Migration) copyStep(ctx context.Context, res *contract.MigrationResult) error {
	sc, err := mig.source()
	if err != nil {
		return err
	}
	tc, err := mig.target()
	if err != nil {
		return err
	}
	if err := mig.refuseSamePair(ctx, "copy"); err != nil {
		return err
	}
	switch mig.cfg.Engine {
	case "postgres":
		return mig.pgCopy(ctx, sc, tc, res)
	case "mysql":
		return mig.myCopy(ctx, sc, tc, res)
	}
	return fmt.Errorf("unknown engine %q", mig.cfg.Engine)
}
