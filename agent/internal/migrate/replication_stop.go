package migrate

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"cairn.dev/agent/contract"
	"cairn.dev/agent/internal/engine"
	"cairn.dev/agent/internal/inventory"
)

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
		if err := mig.waitCaughtUp(ctx, src, tgt, res); err != nil {
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
// every table of the subscription is ready (its initial copy done and
// caught up: until then the apply worker skips its changes, while the
// slot's confirmed position moves on) and the slot's confirmed position
// has passed it: every change committed before the call is applied on the
// target. It fails above the retained-WAL limit (the slot is then dropped
// by the abort), and when ctx ends (the Job's deadline).
func (mig *Migration) waitCaughtUp(ctx context.Context, src, tgt *pgx.Conn, res *contract.MigrationResult) error {
	stopLSN, err := currentLSN(ctx, src)
	if err != nil {
		return err
	}
	start := time.Now()
	if err := mig.waitTablesReady(ctx, tgt, res.Replication.Subscription); err != nil {
		return err
	}
	if _, err := mig.waitConfirmed(ctx, src, res.Replication.Slot, stopLSN); err != nil {
		return err
	}
	res.Actions = append(res.Actions, fmt.Sprintf("the target applied every change up to the source's WAL position %s, read after writes stopped, every table ready (waited %s)",
		stopLSN, time.Since(start).Round(time.Millisecond)))
	return nil
}

// waitTablesReady waits until no table of subscription sub is still being
// copied or catching up (pg_subscription_rel state 'r' for all), or ctx
// ends.
func (mig *Migration) waitTablesReady(ctx context.Context, tgt *pgx.Conn, sub string) error {
	for {
		var notReady []string
		rows, err := tgt.Query(ctx, `SELECT r.srrelid::regclass::text || ' (' || r.srsubstate::text || ')'
FROM pg_subscription s JOIN pg_subscription_rel r ON r.srsubid = s.oid WHERE s.subname = $1 AND r.srsubstate <> 'r' ORDER BY 1`, sub)
		if err == nil {
			notReady, err = pgx.CollectRows(rows, pgx.RowTo[string])
		}
		if err != nil {
			return fmt.Errorf("target: subscription %s's tables: %w", sub, err)
		}
		if len(notReady) == 0 {
			return nil
		}
		mig.log.Debug("waiting for the subscription's tables to be ready", "tables", notReady)
		select {
		case <-ctx.Done():
			return fmt.Errorf("the target's initial copy of %s did not finish before the deadline: %w", strings.Join(notReady, ", "), ctx.Err())
		case <-time.After(catchUpPoll):
		}
	}
}

// currentLSN is the source's current WAL insert position: the end of
// every record written so far, commits included. Not the write position
// (pg_current_wal_lsn): a source that commits asynchronously
// (synchronous_commit=off) returns from a commit before its record is
// written, so the write position can stand before it — a replication-stop
// under load once waited for 0/11166000, a page boundary short of the last
// 5,000 rows' commit, and its exact check then found them missing.
func currentLSN(ctx context.Context, src *pgx.Conn) (string, error) {
	var lsn string
	if err := src.QueryRow(ctx, "SELECT pg_current_wal_insert_lsn()::text").Scan(&lsn); err != nil {
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
