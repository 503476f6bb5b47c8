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
	"time"

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

// replicationStop is cutover's end of replication, run once the writes to
// the source have stopped (read-only, or the user's declaration): it reads
// the source's current WAL position, waits until the subscription has
// confirmed everything up to it (so no write committed before the stop is
// left behind; bounded by the Job's deadline and by the retained-WAL
// limit), disables the subscription, copies the sequences' values (not
// replicated; read after the last change was applied, so no key the source
// handed out is handed out again on the target), then drops the
// subscription, the slot and the publication. Whatever is absent is
// skipped, so it can be repeated. A target it cannot reach fails the step
// (exit 1): the migration then aborts, and the abort step drops the
// source's slot and publication.
func (mig *Migration) replicationStop(ctx context.Context, sc engine.Conn, res *contract.MigrationResult) error {
	return mig.dropReplication(ctx, sc, res, true)
}

// dropReplication removes the migration's replication objects. cutover:
// first wait for the target to catch up with the source's current WAL
// position and copy the sequences (replication-stop); otherwise (abort)
// the target's subscription is dropped when the target is reachable, and
// the source's slot and publication always — an unreachable target never
// keeps the source's WAL.
func (mig *Migration) dropReplication(ctx context.Context, sc engine.Conn, res *contract.MigrationResult, cutover bool) error {
	src, err := inventory.ConnectPostgres(ctx, sc, sc.Database)
	if err != nil {
		return fmt.Errorf("source: %w", err)
	}
	defer src.Close(context.WithoutCancel(ctx))
	// After cutover the source database is read-only for new sessions.
	if _, err := src.Exec(ctx, "SET SESSION default_transaction_read_only = off"); err != nil {
		return fmt.Errorf("source: %w", err)
	}
	tc, terr := mig.target()
	var tgtErr error
	if terr == nil {
		tgtErr = mig.dropSubscription(ctx, src, sc, tc, res, cutover)
	} else {
		tgtErr = terr
	}
	if tgtErr != nil && cutover {
		// Nothing dropped: the abort that follows cleans up.
		return fmt.Errorf("target: %w", tgtErr)
	}
	if tgtErr != nil {
		mig.log.Warn("target side of the replication cleanup failed; dropping the source's slot and publication anyway", "error", tgtErr)
		res.Actions = append(res.Actions, "target not cleaned up: "+tgtErr.Error())
	}
	if cutover && res.Verification != nil && res.Verification.Mismatched > 0 {
		return nil // the exact check failed: replication stays for the abort
	}
	if err := mig.dropSourceReplication(ctx, src, res); err != nil {
		return err
	}
	if tgtErr != nil {
		return fmt.Errorf("source cleaned up, but the target: %w", tgtErr)
	}
	return nil
}

// dropSourceReplication drops the slot (ending a walsender still using
// it) and the publication on the source.
func (mig *Migration) dropSourceReplication(ctx context.Context, src *pgx.Conn, res *contract.MigrationResult) error {
	n := res.Replication
	deadline := time.Now().Add(30 * time.Second)
	for {
		var pid *int32
		err := src.QueryRow(ctx, "SELECT active_pid FROM pg_replication_slots WHERE slot_name = $1", n.Slot).Scan(&pid)
		if errors.Is(err, pgx.ErrNoRows) {
			break
		}
		if err != nil {
			return fmt.Errorf("source: %w", err)
		}
		if pid != nil {
			if time.Now().After(deadline) {
				return fmt.Errorf("replication slot %s is still in use by process %d", n.Slot, *pid)
			}
			src.Exec(ctx, "SELECT pg_terminate_backend($1)", *pid)
			time.Sleep(200 * time.Millisecond) // the bounded wait for the walsender to exit
			continue
		}
		if _, err := src.Exec(ctx, "SELECT pg_drop_replication_slot($1)", n.Slot); err != nil {
			if time.Now().After(deadline) {
				return fmt.Errorf("source: drop replication slot %s: %w", n.Slot, err)
			}
			continue
		}
		res.Actions = append(res.Actions, "dropped replication slot "+n.Slot+" on the source")
		break
	}
	if _, err := src.Exec(ctx, "DROP PUBLICATION IF EXISTS "+inventory.Ident(n.Publication)); err != nil {
		return fmt.Errorf("source: drop publication: %w", err)
	}
	res.Actions = append(res.Actions, "publication "+n.Publication+" absent on the source")
	return nil
}

func (mig *Migration) dropSubscription(ctx context.Context, src *pgx.Conn, sc, tc engine.Conn, res *contract.MigrationResult, cutover bool) error {
	n := res.Replication
	tgt, err := inventory.ConnectPostgres(ctx, tc, tc.Database)
	if err != nil {
		return fmt.Errorf("target: %w", err)
	}
	defer tgt.Close(context.WithoutCancel(ctx))
	var exists bool
	if err := tgt.QueryRow(ctx, "SELECT EXISTS (SELECT 1 FROM pg_subscription WHERE subname = $1)", n.Subscription).Scan(&exists); err != nil {
		return err
	}
	if !exists {
		return nil
	}
	sub := inventory.Ident(n.Subscription)
	if cutover {
		if err := mig.waitCaughtUp(ctx, src, res); err != nil {
			return err
		}
		if _, err := tgt.Exec(ctx, "ALTER SUBSCRIPTION "+sub+" DISABLE"); err != nil {
			return fmt.Errorf("ALTER SUBSCRIPTION %s DISABLE: %w", n.Subscription, err)
		}
		// Sequences are not replicated: their values now, after the last
		// change was applied, in one snapshot of the source.
		tx, err := src.BeginTx(ctx, pgx.TxOptions{IsoLevel: pgx.RepeatableRead, AccessMode: pgx.ReadOnly})
		if err != nil {
			return fmt.Errorf("source: %w", err)
		}
		tables, err := (&inventory.Postgres{Conn: sc, C: src}).Tables(ctx, mig.cfg.Migrate.Filter, "")
		if err == nil {
			err = pgCopySequences(ctx, tx, tc, tables, mig.cfg.Migrate.Filter)
		}
		tx.Rollback(context.WithoutCancel(ctx))
		if err != nil {
			return fmt.Errorf("sequences: %w", err)
		}
		res.Actions = append(res.Actions, "copied sequence values to the target")
		if differs, err := mig.exactCheck(ctx, sc, res); err != nil || differs {
			return err // a difference: nothing dropped, the abort does it
		}
	}
	for _, s := range []string{"ALTER SUBSCRIPTION " + sub + " DISABLE", "ALTER SUBSCRIPTION " + sub + " SET (slot_name = NONE)", "DROP SUBSCRIPTION " + sub} {
		if _, err := tgt.Exec(ctx, s); err != nil {
			return fmt.Errorf("%s: %w", s, err)
		}
	}
	res.Actions = append(res.Actions, "dropped subscription "+n.Subscription+" on the target")
	return nil
}

// waitCaughtUp reads the source's current WAL position and waits until
// the slot's confirmed position has passed it: every change committed
// before the call is applied on the target. It fails above the
// retained-WAL limit (the slot is then dropped by the abort), and when
// ctx ends (the Job's deadline).
func (mig *Migration) waitCaughtUp(ctx context.Context, src *pgx.Conn, res *contract.MigrationResult) error {
	stopLSN, err := currentLSN(ctx, src)
	if err != nil {
		return err
	}
	start := time.Now()
	if _, err := mig.waitConfirmed(ctx, src, res.Replication.Slot, stopLSN); err != nil {
		return err
	}
	res.Actions = append(res.Actions, fmt.Sprintf("the target applied every change up to the source's WAL position %s, read after writes stopped (waited %s)",
		stopLSN, time.Since(start).Round(time.Millisecond)))
	return nil
}

// currentLSN is the source's current WAL write position.
func currentLSN(ctx context.Context, src *pgx.Conn) (string, error) {
	var lsn string
	if err := src.QueryRow(ctx, "SELECT pg_current_wal_lsn()::text").Scan(&lsn); err != nil {
		return "", fmt.Errorf("source: %w", err)
	}
	return lsn, nil
}

// waitConfirmed waits until the slot's confirmed position has reached
// lsn (the target applied every change committed before it) and returns
// the lag it last saw (0 once reached). It fails above the retained-WAL
// limit and when ctx ends.
func (mig *Migration) waitConfirmed(ctx context.Context, src *pgx.Conn, slot, lsn string) (int64, error) {
	for {
		var done bool
		var lag, retained int64
		err := src.QueryRow(ctx, `SELECT coalesce(confirmed_flush_lsn >= $2::pg_lsn, false),
  coalesce($2::pg_lsn - confirmed_flush_lsn, 0)::bigint, coalesce(pg_current_wal_lsn() - restart_lsn, 0)::bigint
FROM pg_replication_slots WHERE slot_name = $1`, slot, lsn).Scan(&done, &lag, &retained)
		if errors.Is(err, pgx.ErrNoRows) {
			return 0, fmt.Errorf("replication slot %s does not exist on the source", slot)
		}
		if err != nil {
			return 0, fmt.Errorf("source: %w", err)
		}
		if done {
			return 0, nil
		}
		if err := mig.overRetainedWAL(retained, slot, " while waiting for the target to catch up", fmt.Sprintf("%d bytes behind %s", lag, lsn)); err != nil {
			return lag, err
		}
		mig.log.Debug("waiting for the target to catch up", "lsn", lsn, "lagBytes", lag)
		select {
		case <-ctx.Done():
			return lag, fmt.Errorf("the target did not catch up with the source's WAL position %s before the deadline (%d bytes behind): %w", lsn, lag, ctx.Err())
		case <-time.After(catchUpPoll):
		}
	}
}

// catchUpPoll is how often waitCaughtUp looks at the slot.
const catchUpPoll = 200 * time.Millisecond
