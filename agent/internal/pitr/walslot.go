package pitr

// The archiver's physical replication slot, and the watchdog that drops it
// when it retains too much WAL.

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
)

// slotState is the archiver's slot as the server has it.
type slotState struct {
	exists   bool
	restart  LSN
	lost     bool
	retained int64
	active   bool
}

func readSlot(ctx context.Context, db *pgx.Conn, slot string) (slotState, error) {
	var restart *string
	var status *string
	var retained *int64
	var active bool
	err := db.QueryRow(ctx, `SELECT restart_lsn::text, wal_status, (pg_current_wal_lsn() - restart_lsn)::bigint, active
  FROM pg_replication_slots WHERE slot_name = $1`, slot).Scan(&restart, &status, &retained, &active)
	if errors.Is(err, pgx.ErrNoRows) {
		return slotState{}, nil
	}
	if err != nil {
		return slotState{}, fmt.Errorf("reading replication slot %s: %w", slot, err)
	}
	s := slotState{exists: true, active: active}
	if retained != nil {
		s.retained = *retained
	}
	if restart != nil {
		if s.restart, err = ParseLSN(*restart); err != nil {
			return s, err
		}
	}
	s.lost = restart == nil || status != nil && *status == "lost"
	return s, nil
}

// watch drops the slot when it retains more than MaxRetainedWALBytes.
func (a *WALArchiver) watch(ctx context.Context, db *pgx.Conn) error {
	if a.MaxRetainedWALBytes <= 0 {
		return nil
	}
	r, err := WatchSlot(ctx, db, a.Slot, a.MaxRetainedWALBytes)
	if err == nil && r.Dropped {
		a.Log.Warn("dropped the archiver's replication slot: it retained more WAL than the limit (the archive has fallen behind and will show a gap)",
			"slot", a.Slot, "retainedBytes", r.RetainedBytes, "limit", a.MaxRetainedWALBytes)
	}
	return err
}

// SlotReport is what the watchdog saw of the archiver's slot.
type SlotReport struct {
	Slot          string
	Exists        bool
	Active        bool
	RetainedBytes int64
	Dropped       bool
	// MaxSlotWALKeepSize is the server's own bound ("-1": none).
	MaxSlotWALKeepSize string
}

// ReleaseSlot as WatchSlot's limit drops the slot whatever it retains.
const ReleaseSlot = -1

// WatchSlot reads the slot's retained WAL and drops the slot when it is
// above limit (limit > 0), or whatever it retains (limit ReleaseSlot): the
// source is never held back by an archive that fell behind, nor by one
// that is gone. A walsender holding the slot is ended first.
func WatchSlot(ctx context.Context, db *pgx.Conn, slot string, limit int64) (SlotReport, error) {
	r := SlotReport{Slot: slot}
	if err := db.QueryRow(ctx, "SELECT current_setting('max_slot_wal_keep_size')").Scan(&r.MaxSlotWALKeepSize); err != nil {
		return r, err
	}
	s, err := readSlot(ctx, db, slot)
	if err != nil {
		return r, err
	}
	r.Exists, r.Active, r.RetainedBytes = s.exists, s.active, s.retained
	if !s.exists || limit == 0 || (limit > 0 && s.retained <= limit) {
		return r, nil
	}
	deadline := time.Now().Add(30 * time.Second)
	for {
		var pid *int32
		err := db.QueryRow(ctx, "SELECT active_pid FROM pg_replication_slots WHERE slot_name = $1", slot).Scan(&pid)
		if errors.Is(err, pgx.ErrNoRows) {
			r.Dropped = true
			return r, nil
		}
		if err != nil {
			return r, err
		}
		if pid != nil {
			db.Exec(ctx, "SELECT pg_terminate_backend($1)", *pid)
		}
		if _, err = db.Exec(ctx, "SELECT pg_drop_replication_slot($1)", slot); err == nil {
			r.Dropped = true
			return r, nil
		}
		if time.Now().After(deadline) {
			return r, fmt.Errorf("dropping replication slot %s: %w", slot, err)
		}
		select {
		case <-ctx.Done():
			return r, ctx.Err()
		case <-time.After(200 * time.Millisecond): // the bounded wait for its holder to exit
		}
	}
}
