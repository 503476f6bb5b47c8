package pitr

// Closing the segment being written every MaxSegmentAge (pg_switch_wal,
// when it holds changes), and the proof of quiet of an idle server.

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"path"
	"strconv"
	"time"

	"github.com/jackc/pgx/v5"

	"cairn.dev/agent/internal/store"
)

// Covered is the archive's newest proof of quiet: at At (the server's
// clock), nothing had changed since segment Through was closed, so every
// change committed before At is archived. An idle server gets no new
// segment; this keeps its recoverable window moving (one small object,
// rewritten every MaxSegmentAge while the server is idle).
type Covered struct {
	Through string    `json:"through"`
	At      time.Time `json:"at"`
}

// CoveredKey is the store key of the archive's Covered record.
func CoveredKey(dir string) string { return path.Join(dir, "covered") }

// putCovered stores c as the archive's proof of quiet (either engine's
// archiver).
func putCovered(ctx context.Context, st store.Store, dir string, c Covered) error {
	b, err := json.Marshal(c)
	if err != nil {
		return err
	}
	_, err = st.Put(ctx, CoveredKey(dir), bytes.NewReader(b))
	return err
}

// loop ships segments and closes the current one every MaxSegmentAge, until
// ctx ends or the reader stops (its error).
func (a *WALArchiver) loop(ctx context.Context, db *pgx.Conn, done <-chan error, tick time.Duration) error {
	lastSwitch := time.Now()
	var opened switchState // the server right after the archiver's last switch
	for {
		select {
		case <-ctx.Done():
			<-done
			return nil
		case err := <-done:
			return err
		case <-time.After(tick):
		}
		if time.Since(lastSwitch) >= a.MaxSegmentAge {
			if err := a.switchWAL(ctx, db, &opened); err != nil {
				a.Log.Warn("closing the current WAL segment", "err", err)
			}
			lastSwitch = time.Now()
		}
		if err := a.ship(ctx, db); err != nil {
			a.Log.Warn("storing closed segments", "err", err)
			if n := a.unshipped(); n >= MaxSpoolSegments {
				return fmt.Errorf("%w (%d segments): %v", errSpoolFull, n, err)
			}
		}
		if err := a.watch(ctx, db); err != nil {
			a.Log.Warn("checking the replication slot", "err", err)
		}
	}
}

// switchState is what the archiver compares to know whether the segment
// being written holds changes since its last switch.
type switchState struct {
	lsn LSN
	// xmax is the next transaction id to be assigned: every change to
	// data (sequences and DDL included) is made by a transaction with an
	// id, so an unchanged xmax means no new change began. running: some
	// transaction was in progress (it may commit without a new id).
	xmax    uint64
	running bool
	// now is the server's clock when it was read.
	now time.Time
}

func readSwitchState(ctx context.Context, db *pgx.Conn) (switchState, error) {
	var s switchState
	var lsn string
	var xmin uint64
	err := db.QueryRow(ctx, `SELECT clock_timestamp(), pg_current_wal_insert_lsn()::text, pg_snapshot_xmin(pg_current_snapshot())::text::numeric::bigint,
  pg_snapshot_xmax(pg_current_snapshot())::text::numeric::bigint`).Scan(&s.now, &lsn, &xmin, &s.xmax)
	if err != nil {
		return s, err
	}
	s.running = xmin < s.xmax
	s.lsn, err = ParseLSN(lsn)
	return s, err
}

// switchWAL closes the segment being written if it holds changes since
// the archiver's last switch: every change committed before the switch is
// then in a closed segment. WAL the server writes on its own while idle
// (checkpoints, its running-transactions records) closes nothing: an idle
// server does not get a new segment every MaxSegmentAge.
func (a *WALArchiver) switchWAL(ctx context.Context, db *pgx.Conn, opened *switchState) error {
	cur, err := readSwitchState(ctx, db)
	if err != nil {
		return err
	}
	a.Log.Debug("segment age reached", "lsn", cur.lsn, "xmax", cur.xmax, "running", cur.running,
		"lastLSN", opened.lsn, "lastXmax", opened.xmax, "lastRunning", opened.running)
	if cur.lsn == opened.lsn || cur.xmax == opened.xmax && !opened.running && !cur.running {
		// Nothing since the last switch: once the segment it closed is
		// stored, every change committed before now is archived.
		if a.lastClosed != "" && a.newest >= a.lastClosed {
			if err := putCovered(ctx, a.Store, a.Dir, Covered{Through: a.newest, At: cur.now.UTC()}); err != nil {
				return err
			}
			if a.CaughtUp != nil {
				a.CaughtUp(cur.now)
			}
		}
		return nil
	}
	// The state read before the switch is the next one's baseline: what
	// it holds is before the switch; a change that slips in between is
	// seen next time.
	// The server's clock right before the switch: commit times are its.
	var at time.Time
	var end, tliS string
	if err := db.QueryRow(ctx, "SELECT clock_timestamp(), pg_switch_wal()::text, (SELECT timeline_id FROM pg_control_checkpoint())::text").Scan(&at, &end, &tliS); err != nil {
		return err
	}
	endLSN, err := ParseLSN(end)
	if err != nil {
		return err
	}
	tli, _ := strconv.Atoi(tliS)
	if endLSN > 0 {
		a.lastClosed = WALName(tli, endLSN-1, a.segSize)
		a.switched[a.lastClosed] = at
	}
	*opened = cur
	return nil
}
