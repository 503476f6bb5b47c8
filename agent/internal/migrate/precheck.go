package migrate

import (
	"context"
	"fmt"
	"strconv"
	"strings"

	"cairn.dev/agent/contract"
	"cairn.dev/agent/internal/engine"
	"cairn.dev/agent/internal/inventory"
)

// problems collects precheck findings, at most maxProblems of a kind.
type problems struct {
	list []string
}

const maxProblems = 20

func (p *problems) add(format string, args ...any) {
	p.list = append(p.list, fmt.Sprintf(format, args...))
}

// addNames adds one problem per name (the first maxProblems), then a
// summary of the rest.
func (p *problems) addNames(format string, names []string) {
	for i, n := range names {
		if i == maxProblems {
			p.add("… and %d more", len(names)-maxProblems)
			return
		}
		p.add(format, n)
	}
}

// major returns the major version of a server version string: 15 of
// "15.4 (Debian 15.4-1)", 10 of "10.11.6-MariaDB", 8 of "8.0.36".
func major(v string) int {
	v = strings.TrimSpace(v)
	end := strings.IndexFunc(v, func(r rune) bool { return r < '0' || r > '9' })
	if end < 0 {
		end = len(v)
	}
	n, _ := strconv.Atoi(v[:end])
	return n
}

func (mig *Migration) precheck(ctx context.Context, res *contract.MigrationResult, checkSource, checkTarget bool) error {
	m := mig.cfg.Migrate
	if checkSource && checkTarget {
		// The target checks write (a probe table): not into the source.
		if err := mig.refuseSamePair(ctx, "precheck"); err != nil {
			return err
		}
	}
	var p problems
	var srcTables []inventory.Table
	if checkSource {
		sc, err := mig.source()
		if err != nil {
			return err
		}
		db, err := inventory.Open(ctx, mig.cfg.Engine, sc)
		if err != nil {
			return fmt.Errorf("source: %w", err)
		}
		defer db.Close()
		if res.SourceVersion, err = db.Version(ctx); err != nil {
			return fmt.Errorf("source version: %w", err)
		}
		if srcTables, err = db.Tables(ctx, m.Filter, mig.schemaName()); err != nil {
			return fmt.Errorf("source: %w", err)
		}
		res.Tables = len(srcTables)
		for _, t := range srcTables {
			res.EstimatedBytes += t.Bytes
		}
		if len(srcTables) == 0 && !m.Filter.Empty() {
			p.add("no table of source database %q matches include %q exclude %q", sc.Database, m.Include, m.Exclude)
		}
		if err := mig.sourceChecks(ctx, db, srcTables, &p, res.SourceVersion); err != nil {
			return err
		}
	}
	if checkTarget {
		tc, err := mig.target()
		if err != nil {
			return err
		}
		if err := mig.targetChecks(ctx, tc, srcTables, checkSource, &p, res); err != nil {
			return err
		}
		if checkSource && mig.cfg.Engine == "postgres" && major(res.TargetVersion) < major(res.SourceVersion) {
			p.add("target PostgreSQL %s is older than source PostgreSQL %s: a dump of a newer server may not restore into an older one",
				res.TargetVersion, res.SourceVersion)
		}
	}
	res.Problems = p.list
	mig.log.Info("precheck", "tables", res.Tables, "estimatedBytes", res.EstimatedBytes, "problems", strings.Join(p.list, " | "))
	return nil
}

func (mig *Migration) sourceChecks(ctx context.Context, db inventory.DB, tables []inventory.Table, p *problems, version string) error {
	switch d := db.(type) {
	case *inventory.Postgres:
		denied, err := pgUnreadable(ctx, d, tables)
		if err != nil {
			return fmt.Errorf("source privileges: %w", err)
		}
		p.addNames("source user "+strconv.Quote(d.Conn.User)+" may not read table %s", denied)
		tool, err := engine.ToolVersion(ctx, "pg_dump")
		if err != nil {
			p.add("%v", err)
		} else if fields := strings.Fields(tool); len(fields) > 0 && major(fields[len(fields)-1]) < major(version) {
			p.add("%s cannot dump PostgreSQL %s (pg_dump dumps servers of its own major version and older): use an agent image with a newer client", tool, version)
		}
		if mig.cfg.Migrate.Mode == "Continuous" {
			if err := pgReplicationChecks(ctx, d, tables, p); err != nil {
				return err
			}
		}
		if mig.cfg.Migrate.SourceReadOnly {
			if err := pgReadOnlyChecks(ctx, d, p); err != nil {
				return err
			}
		}
	case *inventory.MySQL:
		if mig.cfg.Migrate.SourceReadOnly {
			myReadOnlyChecks(version, p)
		}
		for _, t := range tables {
			rows, err := d.C.QueryContext(ctx, "SELECT * FROM "+inventory.QuoteIdent(t.Name)+" LIMIT 0")
			if err != nil {
				p.add("source user %q may not read table %s: %v", d.Conn.User, t.Key(), err)
				continue
			}
			rows.Close()
		}
	}
	return nil
}

func (mig *Migration) targetChecks(ctx context.Context, tc engine.Conn, srcTables []inventory.Table, haveSource bool, p *problems, res *contract.MigrationResult) error {
	switch mig.cfg.Engine {
	case "postgres":
		return mig.pgTargetChecks(ctx, tc, srcTables, haveSource, p, res)
	case "mysql":
		return mig.myTargetChecks(ctx, tc, p, res)
	}
	return fmt.Errorf("unknown engine %q", mig.cfg.Engine)
}

// existingTargetTables reports included tables already on the target.
func (mig *Migration) existingTargetTables(ctx context.Context, db inventory.DB, p *problems) error {
	m := mig.cfg.Migrate
	tables, err := db.Tables(ctx, m.Filter, mig.schemaName())
	if err != nil {
		return fmt.Errorf("target: %w", err)
	}
	if len(tables) == 0 || m.AllowNonEmptyTarget {
		return nil
	}
	names := make([]string, len(tables))
	for i, t := range tables {
		names[i] = t.Key()
	}
	p.addNames("target already has table %s (set allowNonEmptyTarget to replace included tables)", names)
	return nil
}
