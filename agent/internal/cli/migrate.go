package cli

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"cairn.dev/agent/contract"
	"cairn.dev/agent/internal/config"
	"cairn.dev/agent/internal/engine"
	"cairn.dev/agent/internal/inventory"
)

// migrate runs one step of a migration (the contract is in
// cairn.dev/agent/result/migration.go; docs/migration-agent.md describes
// each step). Every step is safe to run again after a failure or a kill.
func (a *app) migrate(ctx context.Context) ([]byte, error) {
	m := a.cfg.Migrate
	start := a.now()
	res := contract.MigrationResult{Step: m.Step, Engine: a.cfg.Engine}
	a.log = a.log.With("step", m.Step, "migration", m.Migration.String())
	var err error
	switch m.Step {
	case contract.StepPrecheck:
		err = a.precheck(ctx, &res, true, true)
	case contract.StepPrecheckSource:
		err = a.precheck(ctx, &res, true, false)
	case contract.StepPrecheckTarget:
		err = a.precheck(ctx, &res, false, true)
	case contract.StepCopy:
		err = a.copyStep(ctx, &res)
	case contract.StepExport:
		err = a.exportStep(ctx, &res)
	case contract.StepImport:
		err = a.importStep(ctx, &res)
	case contract.StepVerify:
		err = a.verifyStep(ctx, &res)
	case contract.StepCutover:
		err = a.cutoverStep(ctx, &res)
	case contract.StepReplicationStart, contract.StepReplicationStatus, contract.StepReplicationStop:
		err = a.replicationStep(ctx, &res)
	case contract.StepAbort:
		err = a.abortStep(ctx, &res)
	default:
		err = &config.UsageError{Msg: fmt.Sprintf("unknown migrate step %q", m.Step)}
	}
	if err != nil {
		return nil, err
	}
	res.DurationSeconds = seconds(a.now().Sub(start))
	a.log.Info("step finished", "tables", res.Tables, "tablesDone", res.TablesDone, "bytes", res.Bytes,
		"problems", len(res.Problems), "durationSeconds", res.DurationSeconds)
	return contract.MarshalMigration(res)
}

// source and target return the coordinates of each side, or a usage error
// naming what is missing.
func (a *app) source() (engine.Conn, error) {
	return completeConn("source", "CAIRN_DB_", a.cfg.Engine, a.cfg.DB)
}

func (a *app) target() (engine.Conn, error) {
	return completeConn("target", "CAIRN_TARGET_DB_", a.cfg.Engine, a.cfg.Migrate.Target)
}

func completeConn(side, prefix, eng string, c engine.Conn) (engine.Conn, error) {
	var missing []string
	if c.Host == "" {
		missing = append(missing, prefix+"HOST")
	}
	if c.Database == "" {
		missing = append(missing, prefix+"NAME")
	}
	if c.User == "" {
		missing = append(missing, prefix+"USER")
	}
	if len(missing) > 0 {
		return c, &config.UsageError{Msg: fmt.Sprintf("%s database: %s not set", side, strings.Join(missing, ", "))}
	}
	if c.Port == 0 {
		c.Port = 5432
		if eng == "mysql" {
			c.Port = 3306
		}
	}
	return c, nil
}

// schemaName is the name the schema part of a pattern matches for
// MySQL/MariaDB on both sides: the source database's name (the target's
// when a target-side step is not told the source's).
func (a *app) schemaName() string {
	if a.cfg.Engine != "mysql" {
		return ""
	}
	if a.cfg.DB.Database != "" {
		return a.cfg.DB.Database
	}
	return a.cfg.Migrate.Target.Database
}

func (a *app) invOptions(method string) inventory.Options {
	return inventory.Options{Filter: a.cfg.Migrate.Filter, Method: method, Parallel: a.cfg.Migrate.Parallel, SchemaName: a.schemaName()}
}

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

func (a *app) precheck(ctx context.Context, res *contract.MigrationResult, checkSource, checkTarget bool) error {
	m := a.cfg.Migrate
	if checkSource && checkTarget {
		// The target checks write (a probe table): not into the source.
		if err := a.refuseSamePair(ctx, "precheck"); err != nil {
			return err
		}
	}
	var p problems
	var srcTables []inventory.Table
	if checkSource {
		sc, err := a.source()
		if err != nil {
			return err
		}
		db, err := inventory.Open(ctx, a.cfg.Engine, sc)
		if err != nil {
			return fmt.Errorf("source: %w", err)
		}
		defer db.Close()
		if res.SourceVersion, err = db.Version(ctx); err != nil {
			return fmt.Errorf("source version: %w", err)
		}
		if srcTables, err = db.Tables(ctx, m.Filter, a.schemaName()); err != nil {
			return fmt.Errorf("source: %w", err)
		}
		res.Tables = len(srcTables)
		for _, t := range srcTables {
			res.EstimatedBytes += t.Bytes
		}
		if len(srcTables) == 0 && !m.Filter.Empty() {
			p.add("no table of source database %q matches include %q exclude %q", sc.Database, m.Include, m.Exclude)
		}
		if err := a.sourceChecks(ctx, db, srcTables, &p, res.SourceVersion); err != nil {
			return err
		}
	}
	if checkTarget {
		tc, err := a.target()
		if err != nil {
			return err
		}
		if err := a.targetChecks(ctx, tc, srcTables, checkSource, &p, res); err != nil {
			return err
		}
		if checkSource && a.cfg.Engine == "postgres" && major(res.TargetVersion) < major(res.SourceVersion) {
			p.add("target PostgreSQL %s is older than source PostgreSQL %s: a dump of a newer server may not restore into an older one",
				res.TargetVersion, res.SourceVersion)
		}
	}
	res.Problems = p.list
	a.log.Info("precheck", "tables", res.Tables, "estimatedBytes", res.EstimatedBytes, "problems", strings.Join(p.list, " | "))
	return nil
}

func (a *app) sourceChecks(ctx context.Context, db inventory.DB, tables []inventory.Table, p *problems, version string) error {
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
		if a.cfg.Migrate.Mode == "Continuous" {
			if err := pgReplicationChecks(ctx, d, tables, p); err != nil {
				return err
			}
		}
		if a.cfg.Migrate.SourceReadOnly {
			if err := pgReadOnlyChecks(ctx, d, p); err != nil {
				return err
			}
		}
	case *inventory.MySQL:
		if a.cfg.Migrate.SourceReadOnly {
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

func (a *app) targetChecks(ctx context.Context, tc engine.Conn, srcTables []inventory.Table, haveSource bool, p *problems, res *contract.MigrationResult) error {
	m := a.cfg.Migrate
	switch a.cfg.Engine {
	case "postgres":
		return a.pgTargetChecks(ctx, tc, srcTables, haveSource, p, res)
	case "mysql":
		return a.myTargetChecks(ctx, tc, p, res)
	}
	_ = m
	return fmt.Errorf("unknown engine %q", a.cfg.Engine)
}

// existingTargetTables reports included tables already on the target.
func (a *app) existingTargetTables(ctx context.Context, db inventory.DB, p *problems) error {
	m := a.cfg.Migrate
	tables, err := db.Tables(ctx, m.Filter, a.schemaName())
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

// verifyStep compares the target with the source: live (direct), or with
// the inventory an export recorded (store transfer: CAIRN_ARTIFACT set).
func (a *app) verifyStep(ctx context.Context, res *contract.MigrationResult) error {
	m := a.cfg.Migrate
	if m.Verify == "None" {
		res.Verification = &contract.Verification{Method: "None"}
		return nil
	}
	tc, err := a.target()
	if err != nil {
		return err
	}
	if m.Mode == "Continuous" && a.cfg.Artifact == "" {
		// The rows reach the target by the subscription's own table
		// synchronisation, and the source may be written meanwhile:
		// compare once every table is synchronised, at WAL positions the
		// target has applied, re-checking what differs
		// (migrate_converge.go).
		sc, err := a.source()
		if err != nil {
			return err
		}
		return a.convergeVerify(ctx, sc, tc, res)
	}
	method := m.Verify
	var src *inventory.Inventory
	var srcErr error
	done := make(chan struct{})
	if a.cfg.Artifact != "" {
		entry, _, err := a.migrationArtifact(ctx)
		if err != nil {
			return err
		}
		if entry.Inventory == nil || entry.Inventory.Method == inventory.MethodList {
			return fmt.Errorf("artifact %s has no inventory to verify against (exported with verify None?)", entry.Name)
		}
		src = entry.Inventory
		if src.Method == inventory.MethodRowCount {
			method = inventory.MethodRowCount
		}
		close(done)
	} else {
		sc, err := a.source()
		if err != nil {
			return err
		}
		go func() {
			defer close(done)
			src, srcErr = inventory.Take(ctx, a.cfg.Engine, sc, a.invOptions(method))
		}()
	}
	dst, dstErr := inventory.Take(ctx, a.cfg.Engine, tc, a.invOptions(method))
	<-done
	if srcErr != nil {
		return fmt.Errorf("source: %w", srcErr)
	}
	if dstErr != nil {
		return fmt.Errorf("target: %w", dstErr)
	}
	v := inventory.Compare(src, dst, method)
	res.Verification, res.Tables = v, v.Tables
	if v.Mismatched > 0 {
		a.log.Warn("verification found mismatches", "tables", strings.Join(inventory.Mismatched(v), ", "))
	}
	return nil
}

var errNoInventory = errors.New("no inventory")

// cutoverControlTimeout bounds the statements that undo a cutover.
const cutoverControlTimeout = time.Minute

// withTimeout bounds a short control statement.
func withTimeout(ctx context.Context, d time.Duration) (context.Context, context.CancelFunc) {
	return context.WithTimeout(ctx, d)
}
