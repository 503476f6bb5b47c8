package migrate

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"cairn.dev/agent/contract"
	"cairn.dev/agent/internal/engine"
	"cairn.dev/agent/internal/inventory"
)

func pgUnreadable(ctx context.Context, d *inventory.Postgres, tables []inventory.Table) ([]string, error) {
	var denied []string
	for _, t := range tables {
		var ok bool
		err := d.C.QueryRow(ctx, "SELECT has_schema_privilege($1, 'USAGE') AND has_table_privilege($2, 'SELECT')",
			t.Schema, inventory.QualifiedName(t)).Scan(&ok)
		if err != nil {
			return nil, err
		}
		if !ok {
			denied = append(denied, t.Key())
		}
	}
	return denied, nil
}

func pgReplicationChecks(ctx context.Context, d *inventory.Postgres, tables []inventory.Table, p *problems) error {
	var wal string
	var canReplicate bool
	if err := d.C.QueryRow(ctx, "SELECT current_setting('wal_level'), rolreplication OR rolsuper FROM pg_roles WHERE rolname = current_user").
		Scan(&wal, &canReplicate); err != nil {
		return fmt.Errorf("source replication settings: %w", err)
	}
	if wal != "logical" {
		p.add("source wal_level is %s: Continuous mode needs wal_level=logical (a server restart)", wal)
	}
	if !canReplicate {
		p.add("source user %q has neither REPLICATION nor SUPERUSER: Continuous mode needs one to create a replication slot", d.Conn.User)
	}
	// Once published, UPDATE and DELETE fail on a table without a replica
	// identity: the source's application would break.
	var none []string
	for _, t := range tables {
		var ok bool
		err := d.C.QueryRow(ctx, `SELECT c.relreplident = 'f' OR (c.relreplident = 'd' AND EXISTS (SELECT 1 FROM pg_index i WHERE i.indrelid = c.oid AND i.indisprimary))
  OR (c.relreplident = 'i' AND EXISTS (SELECT 1 FROM pg_index i WHERE i.indrelid = c.oid AND i.indisreplident))
FROM pg_class c WHERE c.oid = $1::regclass`, inventory.QualifiedName(t)).Scan(&ok)
		if err != nil {
			return fmt.Errorf("source replica identity of %s: %w", t.Key(), err)
		}
		if !ok {
			none = append(none, t.Key())
		}
	}
	p.addNames("source table %s has no primary key or replica identity: once published, UPDATE and DELETE on it would fail (add a primary key, or REPLICA IDENTITY FULL)", none)
	var los int64
	if err := d.C.QueryRow(ctx, "SELECT count(*) FROM pg_largeobject_metadata").Scan(&los); err != nil {
		return fmt.Errorf("source large objects: %w", err)
	}
	if los > 0 {
		p.add("source has %d large objects: logical replication does not carry them (the copy takes them as they are at its start; later changes would be lost): use Full mode", los)
	}
	return nil
}

// pgConnectTarget connects to the target database, or, when it does not
// exist yet, returns exists=false and a connection to "postgres".
func pgConnectTarget(ctx context.Context, tc engine.Conn) (*pgx.Conn, bool, error) {
	c, err := inventory.ConnectPostgres(ctx, tc, tc.Database)
	if err == nil {
		return c, true, nil
	}
	var pe *pgconn.PgError
	if errors.As(err, &pe) && pe.Code == "3D000" || strings.Contains(err.Error(), "SQLSTATE 3D000") {
		c, err2 := inventory.ConnectPostgres(ctx, tc, "postgres")
		if err2 != nil {
			return nil, false, fmt.Errorf("target: %w", err2)
		}
		return c, false, nil
	}
	return nil, false, fmt.Errorf("target: %w", err)
}

func (mig *Migration) pgTargetChecks(ctx context.Context, tc engine.Conn, srcTables []inventory.Table, haveSource bool, p *problems, res *contract.MigrationResult) error {
	c, exists, err := pgConnectTarget(ctx, tc)
	if err != nil {
		return err
	}
	defer c.Close(context.WithoutCancel(ctx))
	if err := c.QueryRow(ctx, "SHOW server_version").Scan(&res.TargetVersion); err != nil {
		return fmt.Errorf("target version: %w", err)
	}
	if !exists {
		var can bool
		if err := c.QueryRow(ctx, "SELECT rolcreatedb OR rolsuper FROM pg_roles WHERE rolname = current_user").Scan(&can); err != nil {
			return fmt.Errorf("target privileges: %w", err)
		}
		if !can {
			p.add("target database %q does not exist and user %q may not create databases", tc.Database, tc.User)
		}
		return nil
	}
	if err := mig.existingTargetTables(ctx, &inventory.Postgres{Conn: tc, C: c}, p); err != nil {
		return err
	}
	// Can the target user create what the copy creates? Try it in a
	// transaction that is rolled back: nothing stays.
	schemas := []string{"public"}
	if haveSource {
		schemas = nil
		for _, t := range srcTables {
			if !slices.Contains(schemas, t.Schema) {
				schemas = append(schemas, t.Schema)
			}
		}
	}
	tx, err := c.Begin(ctx)
	if err != nil {
		return fmt.Errorf("target: %w", err)
	}
	defer tx.Rollback(context.WithoutCancel(ctx))
	for _, s := range schemas {
		if _, err := tx.Exec(ctx, "SAVEPOINT probe"); err != nil {
			return err
		}
		_, err := tx.Exec(ctx, "CREATE SCHEMA IF NOT EXISTS "+inventory.Ident(s))
		if err == nil {
			_, err = tx.Exec(ctx, "CREATE TABLE "+inventory.Ident(s)+".cairn_precheck_probe (id int); INSERT INTO "+
				inventory.Ident(s)+".cairn_precheck_probe VALUES (1)")
		}
		if err != nil {
			p.add("target user %q may not create tables in schema %q of database %q: %v", tc.User, s, tc.Database, err)
		}
		if _, err := tx.Exec(ctx, "ROLLBACK TO SAVEPOINT probe"); err != nil {
			return err
		}
	}
	if mig.cfg.Migrate.Mode == "Continuous" {
		var super bool
		if err := c.QueryRow(ctx, "SELECT rolsuper FROM pg_roles WHERE rolname = current_user").Scan(&super); err != nil {
			return err
		}
		if !super && major(res.TargetVersion) < 16 {
			p.add("target user %q is not a superuser: CREATE SUBSCRIPTION needs one before PostgreSQL 16", tc.User)
		}
	}
	return nil
}
