package migrate

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/jackc/pgx/v5"

	"cairn.dev/agent/contract"
	"cairn.dev/agent/internal/config"
	"cairn.dev/agent/internal/engine"
	"cairn.dev/agent/internal/inventory"
)

// Continuous mode (PostgreSQL): the copy step creates the schema only, and
// the subscription's own initial synchronisation (copy_data) copies the
// rows, table by table, each in a snapshot consistent with the slot's
// start — so no row is copied twice or missed between an initial copy and
// the start of replication. Then the target applies the source's changes
// until cutover.
//
//	replication-start   publication (source) → slot (source) → subscription
//	                    (target); each created only if absent.
//	replication-status  lag, retained WAL, tables synced; fails (exit 1)
//	                    above CAIRN_REPLICATION_MAX_RETAINED_WAL_BYTES.
//	replication-stop    sequences copied to the target, subscription,
//	                    slot and publication dropped; each only if present,
//	                    and the source's slot and publication even when the
//	                    target is unreachable (the leaked slot is what fills
//	                    a source's disk).

// replicationNames are the names of a migration's replication objects:
// "cairn_" and 16 hex digits of the SHA-256 of the MigrationJob's UID.
func (mig *Migration) replicationNames() (contract.Replication, error) {
	uid := mig.cfg.Migrate.UID
	if uid == "" {
		return contract.Replication{}, &config.UsageError{Msg: "CAIRN_MIGRATION_UID is not set: it names the replication objects"}
	}
	h := sha256.Sum256([]byte(uid))
	base := "cairn_" + hex.EncodeToString(h[:8])
	return contract.Replication{Publication: base + "_pub", Subscription: base + "_sub", Slot: base + "_slot"}, nil
}

func (mig *Migration) replicationStep(ctx context.Context, res *contract.MigrationResult) error {
	if mig.cfg.Engine != "postgres" {
		return &config.UsageError{Msg: "replication steps are PostgreSQL only (Continuous mode)"}
	}
	names, err := mig.replicationNames()
	if err != nil {
		return err
	}
	sc, err := mig.source()
	if err != nil {
		return err
	}
	res.Replication = &names
	switch mig.cfg.Migrate.Step {
	case contract.StepReplicationStart:
		tc, err := mig.target()
		if err != nil {
			return err
		}
		if err := mig.refuseSamePair(ctx, "start replication"); err != nil {
			return err
		}
		return mig.replicationStart(ctx, sc, tc, res)
	case contract.StepReplicationStatus:
		tc, err := mig.target()
		if err != nil {
			return err
		}
		return mig.replicationStatus(ctx, sc, tc, res)
	default:
		return mig.replicationStop(ctx, sc, res)
	}
}

func (mig *Migration) replicationStart(ctx context.Context, sc, tc engine.Conn, res *contract.MigrationResult) (err error) {
	n := res.Replication
	// The target first: nothing is created on the source for a target
	// that cannot take the subscription.
	tgt, err := inventory.ConnectPostgres(ctx, tc, tc.Database)
	if err != nil {
		return fmt.Errorf("target: %w", err)
	}
	defer tgt.Close(context.WithoutCancel(ctx))
	var subExists bool
	if err := tgt.QueryRow(ctx, "SELECT EXISTS (SELECT 1 FROM pg_subscription WHERE subname = $1)", n.Subscription).Scan(&subExists); err != nil {
		return fmt.Errorf("target: %w", err)
	}
	src, err := inventory.ConnectPostgres(ctx, sc, sc.Database)
	if err != nil {
		return fmt.Errorf("source: %w", err)
	}
	defer src.Close(context.WithoutCancel(ctx))
	tables, err := (&inventory.Postgres{Conn: sc, C: src}).Tables(ctx, mig.cfg.Migrate.Filter, "")
	if err != nil {
		return fmt.Errorf("source: %w", err)
	}
	if len(tables) == 0 {
		return &config.UsageError{Msg: "no source table to replicate"}
	}
	subscribed := subExists
	if !subExists {
		// Until the subscription exists, the slot and publication are this
		// step's: a failure below drops them again, so no slot is left
		// retaining WAL on the source for a subscription that never came.
		defer func() {
			if err == nil || subscribed {
				return
			}
			cleanup := &contract.MigrationResult{Replication: &contract.Replication{Publication: n.Publication, Subscription: n.Subscription, Slot: n.Slot}}
			if derr := mig.dropSourceReplication(context.WithoutCancel(ctx), src, cleanup); derr != nil {
				err = fmt.Errorf("%w; dropping the slot and publication again also failed: %v (drop them by hand: SELECT pg_drop_replication_slot('%s'); DROP PUBLICATION %s)", err, derr, n.Slot, n.Publication)
				return
			}
			err = fmt.Errorf("%w; the slot and publication were dropped again on the source", err)
		}()
	}
	var exists bool
	if err := src.QueryRow(ctx, "SELECT EXISTS (SELECT 1 FROM pg_publication WHERE pubname = $1)", n.Publication).Scan(&exists); err != nil {
		return fmt.Errorf("source: %w", err)
	}
	if !exists {
		names := make([]string, len(tables))
		for i, t := range tables {
			names[i] = inventory.QualifiedName(t)
		}
		if _, err := src.Exec(ctx, "CREATE PUBLICATION "+inventory.Ident(n.Publication)+" FOR TABLE "+strings.Join(names, ", ")); err != nil {
			return fmt.Errorf("source: create publication: %w", err)
		}
		res.Actions = append(res.Actions, fmt.Sprintf("created publication %s of %d tables on the source", n.Publication, len(tables)))
	}
	if err := src.QueryRow(ctx, "SELECT EXISTS (SELECT 1 FROM pg_replication_slots WHERE slot_name = $1)", n.Slot).Scan(&exists); err != nil {
		return fmt.Errorf("source: %w", err)
	}
	if !exists {
		// Created here rather than by CREATE SUBSCRIPTION, which cannot
		// create a slot in its own cluster (source and target in one
		// server) and would leave no trace to retry from.
		if _, err := src.Exec(ctx, "SELECT pg_create_logical_replication_slot($1, 'pgoutput')", n.Slot); err != nil {
			return fmt.Errorf("source: create replication slot: %w", err)
		}
		res.Actions = append(res.Actions, "created replication slot "+n.Slot+" on the source")
	}
	if !subExists {
		port := sc.Port
		conninfo := "host=" + engine.QuoteConninfo(sc.Host) + " port=" + strconv.Itoa(port) + " user=" + engine.QuoteConninfo(sc.User) +
			" password=" + engine.QuoteConninfo(sc.Password) + " dbname=" + engine.QuoteConninfo(sc.Database) + " application_name=" + n.Subscription
		_, err := tgt.Exec(ctx, "CREATE SUBSCRIPTION "+inventory.Ident(n.Subscription)+" CONNECTION "+quoteLiteral(conninfo)+
			" PUBLICATION "+inventory.Ident(n.Publication)+" WITH (create_slot = false, slot_name = "+quoteLiteral(n.Slot)+", copy_data = true)")
		if err != nil {
			return fmt.Errorf("target: create subscription: %s", engine.Redact(err.Error(), sc.Password))
		}
		subscribed = true
		res.Actions = append(res.Actions, "created subscription "+n.Subscription+" on the target (initial copy by table synchronisation)")
	}
	return mig.fillStatus(ctx, src, tgt, res)
}

func quoteLiteral(s string) string { return "'" + strings.ReplaceAll(s, "'", "''") + "'" }

// connectPair connects to the source and the target databases; closeBoth
// closes both.
func connectPair(ctx context.Context, sc, tc engine.Conn) (src, tgt *pgx.Conn, closeBoth func(), err error) {
	src, err = inventory.ConnectPostgres(ctx, sc, sc.Database)
	if err != nil {
		return nil, nil, nil, fmt.Errorf("source: %w", err)
	}
	tgt, err = inventory.ConnectPostgres(ctx, tc, tc.Database)
	if err != nil {
		src.Close(context.WithoutCancel(ctx))
		return nil, nil, nil, fmt.Errorf("target: %w", err)
	}
	return src, tgt, func() {
		src.Close(context.WithoutCancel(ctx))
		tgt.Close(context.WithoutCancel(ctx))
	}, nil
}

func (mig *Migration) replicationStatus(ctx context.Context, sc, tc engine.Conn, res *contract.MigrationResult) error {
	src, tgt, closeBoth, err := connectPair(ctx, sc, tc)
	if err != nil {
		return err
	}
	defer closeBoth()
	if err := mig.fillStatus(ctx, src, tgt, res); err != nil {
		return err
	}
	r := res.Replication
	return mig.overRetainedWAL(r.RetainedWALBytes, r.Slot, "", fmt.Sprintf("lag %d bytes, %d of %d tables synced", r.LagBytes, r.SyncedTables, r.Tables))
}

// overRetainedWAL is the retained-WAL watchdog's one check, made in every
// phase where a slot exists: an error when slot keeps more WAL on the
// source than MaxRetainedWALBytes, reported with the failure code
// contract.CodeRetainedWALOverLimit, on which the operator drops the
// replication; while says during what.
func (mig *Migration) overRetainedWAL(retained int64, slot, while, detail string) error {
	max := mig.cfg.Migrate.MaxRetainedWALBytes
	if max <= 0 || retained <= max {
		return nil
	}
	return &contract.CodedError{Code: contract.CodeRetainedWALOverLimit, Err: fmt.Errorf(
		"retained WAL %d bytes above limit %d%s: slot %s on the source keeps WAL the target has not confirmed (%s)", retained, max, while, slot, detail)}
}

func (mig *Migration) fillStatus(ctx context.Context, src, tgt *pgx.Conn, res *contract.MigrationResult) error {
	r := res.Replication
	err := src.QueryRow(ctx, `SELECT coalesce(pg_current_wal_lsn() - confirmed_flush_lsn, 0)::bigint,
  coalesce(pg_current_wal_lsn() - restart_lsn, 0)::bigint FROM pg_replication_slots WHERE slot_name = $1`, r.Slot).Scan(&r.LagBytes, &r.RetainedWALBytes)
	if errors.Is(err, pgx.ErrNoRows) {
		return fmt.Errorf("replication slot %s does not exist on the source (replication-start not run, or stopped)", r.Slot)
	}
	if err != nil {
		return fmt.Errorf("source: %w", err)
	}
	// The subscription's walsender names itself after the subscription
	// (application_name in its conninfo); replay_lag is NULL when idle.
	err = src.QueryRow(ctx, `SELECT coalesce(extract(epoch FROM max(replay_lag)), 0)::float8 FROM pg_stat_replication
WHERE application_name = $1`, r.Subscription).Scan(&r.LagSeconds)
	if err != nil {
		return fmt.Errorf("source: replication lag: %w", err)
	}
	err = tgt.QueryRow(ctx, `SELECT count(*) FILTER (WHERE r.srsubstate = 'r'), count(*)
FROM pg_subscription s JOIN pg_subscription_rel r ON r.srsubid = s.oid WHERE s.subname = $1`, r.Subscription).Scan(&r.SyncedTables, &r.Tables)
	if err != nil {
		return fmt.Errorf("target: %w", err)
	}
	res.Tables, res.TablesDone = r.Tables, r.SyncedTables
	return mig.notReplicated(ctx, src, res)
}

// notReplicated finds the included source tables the publication does not
// cover — created after replication-start, since the publication names the
// tables that existed then — and reports each as a warning: their rows do
// not reach the target, and verify would find them missing.
func (mig *Migration) notReplicated(ctx context.Context, src *pgx.Conn, res *contract.MigrationResult) error {
	r := res.Replication
	tables, err := (&inventory.Postgres{C: src}).Tables(ctx, mig.cfg.Migrate.Filter, "")
	if err != nil {
		return fmt.Errorf("source: %w", err)
	}
	rows, err := src.Query(ctx, "SELECT schemaname || '.' || tablename FROM pg_publication_tables WHERE pubname = $1", r.Publication)
	if err != nil {
		return fmt.Errorf("source: %w", err)
	}
	published, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return fmt.Errorf("source: %w", err)
	}
	r.NotReplicated = nil
	for _, t := range tables {
		if !slices.Contains(published, t.Key()) {
			r.NotReplicated = append(r.NotReplicated, t.Key())
		}
	}
	for i, k := range r.NotReplicated {
		if i == maxProblems {
			res.Warnings = append(res.Warnings, fmt.Sprintf("… and %d more tables not replicated", len(r.NotReplicated)-maxProblems))
			break
		}
		res.Warnings = append(res.Warnings, fmt.Sprintf("table %s is not replicated: it was created after replication-start (publication %s covers the tables that existed then); its rows do not reach the target", k, r.Publication))
	}
	if len(r.NotReplicated) > 0 {
		mig.log.Warn("included tables not replicated", "tables", strings.Join(r.NotReplicated, ", "))
	}
	return nil
}
