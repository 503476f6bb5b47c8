// Package migrate is the agent's migration engine: the steps of a
// MigrationJob (docs/migration-agent.md), each run by one agent process and
// safe to run again after a failure or a kill.
//
//   - precheck (precheck*.go): what would make the copy fail, on each side;
//   - copy, direct transfer: PostgreSQL (postgres_copy.go: pg_dump's schema
//     sections around a parallel COPY in one exported snapshot) and
//     MySQL/MariaDB (mysql_copy.go, mysql_rows.go: the schema by mysqldump,
//     the rows in parallel in one snapshot as multi-row INSERTs);
//   - export and import, transfer through a store (store.go), with the
//     artifacts of cairn.dev/agent/internal/backup;
//   - verify (verify.go; converge.go for Continuous mode, comparing at WAL
//     positions the target has applied);
//   - cutover (cutover.go, readonly.go, recopy.go) and abort;
//   - replication-start/-status/-stop, PostgreSQL logical replication for
//     Continuous mode (replication.go, replication_stop.go).
package migrate

import (
	"context"
	"fmt"
	"log/slog"
	"strconv"
	"strings"
	"time"

	"cairn.dev/agent/contract"
	"cairn.dev/agent/internal/backup"
	"cairn.dev/agent/internal/config"
	"cairn.dev/agent/internal/engine"
	"cairn.dev/agent/internal/identity"
	"cairn.dev/agent/internal/inventory"
)

// Migration runs one step of a migration, configured by cfg (cfg.Migrate
// set: the step and the migration's settings).
type Migration struct {
	cfg     *config.Config
	log     *slog.Logger
	now     func() time.Time
	version string
	// backup writes and reads the store transfer's artifacts.
	backup *backup.Runner
}

// New returns the Migration of cfg's step. It logs to log (with the step
// and the migration's name), reads the time from now and records version
// in the artifacts it exports.
func New(cfg *config.Config, log *slog.Logger, now func() time.Time, version string) *Migration {
	log = log.With("step", cfg.Migrate.Step, "migration", cfg.Migrate.Migration.String())
	return &Migration{cfg: cfg, log: log, now: now, version: version, backup: backup.New(cfg, log, now, version, nil)}
}

// Run runs the step and returns its result line (the contract is
// cairn.dev/agent/contract's MigrationResult; docs/migration-agent.md
// describes each step).
func (mig *Migration) Run(ctx context.Context) ([]byte, error) {
	m := mig.cfg.Migrate
	start := mig.now()
	res := contract.MigrationResult{Step: m.Step, Engine: mig.cfg.Engine}
	var err error
	switch m.Step {
	case contract.StepPrecheck:
		err = mig.precheck(ctx, &res, true, true)
	case contract.StepPrecheckSource:
		err = mig.precheck(ctx, &res, true, false)
	case contract.StepPrecheckTarget:
		err = mig.precheck(ctx, &res, false, true)
	case contract.StepCopy:
		err = mig.copyStep(ctx, &res)
	case contract.StepExport:
		err = mig.exportStep(ctx, &res)
	case contract.StepImport:
		err = mig.importStep(ctx, &res)
	case contract.StepVerify:
		err = mig.verifyStep(ctx, &res)
	case contract.StepCutover:
		err = mig.cutoverStep(ctx, &res)
	case contract.StepReplicationStart, contract.StepReplicationStatus, contract.StepReplicationStop:
		err = mig.replicationStep(ctx, &res)
	case contract.StepAbort:
		err = mig.abortStep(ctx, &res)
	default:
		err = &config.UsageError{Msg: fmt.Sprintf("unknown migrate step %q", m.Step)}
	}
	if err != nil {
		return nil, err
	}
	res.DurationSeconds = backup.Seconds(mig.now().Sub(start))
	mig.log.Info("step finished", "tables", res.Tables, "tablesDone", res.TablesDone, "bytes", res.Bytes,
		"problems", len(res.Problems), "durationSeconds", res.DurationSeconds)
	return contract.MarshalMigration(res)
}

// source and target return the coordinates of each side, or a usage error
// naming what is missing.
func (mig *Migration) source() (engine.Conn, error) {
	return completeConn("source", "CAIRN_DB_", mig.cfg.Engine, mig.cfg.DB)
}

func (mig *Migration) target() (engine.Conn, error) {
	return completeConn("target", "CAIRN_TARGET_DB_", mig.cfg.Engine, mig.cfg.Migrate.Target)
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

// refuseSamePair refuses a write step of a migration whose target is its
// source, as the two servers tell (identity.CheckPair). Every step that
// writes calls it first.
func (mig *Migration) refuseSamePair(ctx context.Context, step string) error {
	sc, err := mig.source()
	if err != nil {
		return err
	}
	tc, err := mig.target()
	if err != nil {
		return err
	}
	return identity.CheckPair(ctx, mig.cfg.Engine, step, sc, tc)
}

// schemaName is the name the schema part of a pattern matches for
// MySQL/MariaDB on both sides: the source database's name (the target's
// when a target-side step is not told the source's).
func (mig *Migration) schemaName() string {
	if mig.cfg.Engine != "mysql" {
		return ""
	}
	if mig.cfg.DB.Database != "" {
		return mig.cfg.DB.Database
	}
	return mig.cfg.Migrate.Target.Database
}

func (mig *Migration) invOptions(method string) inventory.Options {
	return inventory.Options{Filter: mig.cfg.Migrate.Filter, Method: method, Parallel: mig.cfg.Migrate.Parallel, SchemaName: mig.schemaName()}
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
	m := mig.cfg.Migrate
	switch mig.cfg.Engine {
	case "postgres":
		return mig.pgTargetChecks(ctx, tc, srcTables, haveSource, p, res)
	case "mysql":
		return mig.myTargetChecks(ctx, tc, p, res)
	}
	_ = m
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

// verifyStep compares the target with the source: live (direct), or with
// the inventory an export recorded (store transfer: CAIRN_ARTIFACT set).
func (mig *Migration) verifyStep(ctx context.Context, res *contract.MigrationResult) error {
	m := mig.cfg.Migrate
	if m.Verify == "None" {
		res.Verification = &contract.Verification{Method: "None"}
		return nil
	}
	tc, err := mig.target()
	if err != nil {
		return err
	}
	if m.Mode == "Continuous" && mig.cfg.Artifact == "" {
		// The rows reach the target by the subscription's own table
		// synchronisation, and the source may be written meanwhile:
		// compare once every table is synchronised, at WAL positions the
		// target has applied, re-checking what differs
		// (migrate_converge.go).
		sc, err := mig.source()
		if err != nil {
			return err
		}
		return mig.convergeVerify(ctx, sc, tc, res)
	}
	method := m.Verify
	var src *inventory.Inventory
	var srcErr error
	done := make(chan struct{})
	if mig.cfg.Artifact != "" {
		entry, _, err := mig.migrationArtifact(ctx)
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
		sc, err := mig.source()
		if err != nil {
			return err
		}
		go func() {
			defer close(done)
			src, srcErr = inventory.Take(ctx, mig.cfg.Engine, sc, mig.invOptions(method))
		}()
	}
	dst, dstErr := inventory.Take(ctx, mig.cfg.Engine, tc, mig.invOptions(method))
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
		mig.log.Warn("verification found mismatches", "tables", strings.Join(inventory.Mismatched(v), ", "))
	}
	return nil
}

// cutoverControlTimeout bounds the statements that undo a cutover.
const cutoverControlTimeout = time.Minute

// withTimeout bounds a short control statement.
func withTimeout(ctx context.Context, d time.Duration) (context.Context, context.CancelFunc) {
	return context.WithTimeout(ctx, d)
}
