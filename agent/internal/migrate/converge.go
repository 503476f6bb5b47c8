package migrate

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"cairn.dev/agent/contract"
	"cairn.dev/agent/internal/engine"
	"cairn.dev/agent/internal/inventory"
)

// Converging verification (Continuous mode, direct transfer). The source
// keeps taking writes while it is compared, and the target applies them a
// moment later: a comparison of the two at one instant finds the rows in
// flight. So every comparison here reads the source first, then reads the
// source's WAL position, waits until the subscription has confirmed it
// (the target has applied every change the source's read saw), and only
// then reads the target. What still differs was written in between, or
// really differs; it is compared again — only the rows that differed, by
// primary key — and each time a row still differs the source is read once
// more: a row the source kept unchanged across the whole comparison yet
// the target holds differently is a confirmed difference.
//
//	round 0      whole inventories (count + checksum per table)
//	round 1..N   the differing tables: per row by a single-column primary
//	             key (tables up to maxKeyedRows rows), else the whole table
//	             again; then only the rows that still differ
//
// Each table ends matched; differs (its difference confirmed in two
// rounds in a row — only this fails verification); or catching up (still
// being written when the rounds ended, or the target did not reach the
// source's position within convergeWait; reported with the lag). Rows
// inserted after round 0 are not in the comparison's scope: replication
// carries them, and cutover's exact check, with writes stopped, covers
// every row.

const (
	// convergeRounds bounds the re-checks of one table.
	convergeRounds = 10
	// confirmRounds: a difference confirmed in this many rounds in a row
	// is final.
	confirmRounds = 2
	// maxKeyedRows: larger tables are re-checked whole (their keys would
	// be held in memory).
	maxKeyedRows = 1_000_000
	// convergeWait bounds one wait for the target to reach the source's
	// position.
	convergeWait = 2 * time.Minute
)

// convTable is one differing table under re-check.
type convTable struct {
	check  *contract.TableCheck
	table  inventory.Table
	pk     string   // quoted single-column primary key; "" compares whole
	pkType string   // its type, for the key list's cast
	keys   []string // the keys that still differ; nil: every row
	// confirmed: per differing key, the rounds in a row it differed with
	// the source's row unchanged across the round.
	confirmed map[string]int
	done      bool
}

// convergeVerify is verify in Continuous mode with direct transfer.
func (mig *Migration) convergeVerify(ctx context.Context, sc, tc engine.Conn, res *contract.MigrationResult) error {
	names, err := mig.replicationNames()
	if err != nil {
		return err
	}
	src, tgt, closeBoth, err := connectPair(ctx, sc, tc)
	if err != nil {
		return err
	}
	defer closeBoth()
	for _, c := range []*pgx.Conn{src, tgt} {
		for _, s := range inventory.OutputSettings {
			if _, err := c.Exec(ctx, s); err != nil {
				return fmt.Errorf("%s: %w", s, err)
			}
		}
	}
	if err := mig.waitReplicated(ctx, src, tgt, names, res); err != nil {
		return err
	}
	method := mig.cfg.Migrate.Verify
	srcInv, err := inventory.Take(ctx, mig.cfg.Engine, sc, mig.invOptions(method))
	if err != nil {
		return fmt.Errorf("source: %w", err)
	}
	lag, reached, err := mig.reachSource(ctx, src, names.Slot)
	if err != nil {
		return err
	}
	tgtInv, err := inventory.Take(ctx, mig.cfg.Engine, tc, mig.invOptions(method))
	if err != nil {
		return fmt.Errorf("target: %w", err)
	}
	v := inventory.Compare(srcInv, tgtInv, method)
	var work []*convTable
	for i := range v.Items {
		it := &v.Items[i]
		switch {
		case it.Match:
			it.State = contract.StateMatched
		case it.Reason != "rows differ" && it.Reason != "content differs":
			it.State = contract.StateDiffers // missing or only on one side
		case !reached:
			it.State, it.LagBytes = contract.StateCatchingUp, lag
		default:
			t, _ := srcInv.Find(it.Table)
			w := &convTable{check: it, table: t}
			if t.Rows <= maxKeyedRows {
				if w.pk, w.pkType, err = primaryKey(ctx, src, t); err != nil {
					return err
				}
			}
			work = append(work, w)
		}
	}
	if err := mig.converge(ctx, src, tgt, names.Slot, method, work); err != nil {
		return err
	}
	finishVerification(v)
	res.Verification, res.Tables = v, v.Tables
	res.Actions = append(res.Actions, convergeSummary(v))
	if v.Mismatched > 0 {
		mig.log.Warn("verification found differences", "tables", strings.Join(inventory.Mismatched(v), ", "))
	}
	return nil
}

// converge re-checks the tables of work, at most convergeRounds times.
func (mig *Migration) converge(ctx context.Context, src, tgt *pgx.Conn, slot, method string, work []*convTable) error {
	for round := 1; round <= convergeRounds; round++ {
		var open []*convTable
		for _, w := range work {
			if !w.done {
				open = append(open, w)
			}
		}
		if len(open) == 0 {
			return nil
		}
		before := make([]map[string]string, len(open))
		for i, w := range open {
			m, err := readRows(ctx, src, w, w.keys, method)
			if err != nil {
				return fmt.Errorf("source: %w", err)
			}
			before[i] = m
		}
		lag, reached, err := mig.reachSource(ctx, src, slot)
		if err != nil {
			return err
		}
		if !reached {
			for _, w := range open {
				w.check.State, w.check.LagBytes, w.done = contract.StateCatchingUp, lag, true
			}
			return nil
		}
		for i, w := range open {
			after, err := readRows(ctx, tgt, w, w.keys, method)
			if err != nil {
				return fmt.Errorf("target: %w", err)
			}
			diff := differing(before[i], after)
			w.check.Rechecks = round
			if len(diff) == 0 {
				w.check.State, w.check.Match, w.check.Reason, w.check.Rows, w.done = contract.StateMatched, true, "", 0, true
				continue
			}
			// The source once more, for the rows that differ: unchanged
			// across the comparison means the target really differs.
			again, err := readRows(ctx, src, w, diff, method)
			if err != nil {
				return fmt.Errorf("source: %w", err)
			}
			confirmed, final := map[string]int{}, 0
			for _, k := range diff {
				if again[k] == before[i][k] {
					confirmed[k] = w.confirmed[k] + 1
					if confirmed[k] >= confirmRounds {
						final++
					}
				}
			}
			w.confirmed = confirmed
			w.check.State = contract.StateCatchingUp
			if w.pk != "" {
				w.keys, w.check.Rows = diff, len(diff)
			}
			if final > 0 {
				// Rows the source kept unchanged, twice, that the target
				// holds differently after applying every change up to them.
				w.check.State, w.done = contract.StateDiffers, true
				if w.pk != "" {
					w.check.Rows = final
				}
			}
			mig.log.Info("re-checked a differing table", "table", w.check.Table, "round", round, "rows", len(diff), "confirmed", len(confirmed))
		}
	}
	for _, w := range work {
		if !w.done {
			w.check.State = contract.StateCatchingUp
			if lag, err := slotLag(ctx, src, slot); err == nil {
				w.check.LagBytes = lag
			}
		}
	}
	return nil
}

// reachSource reads the source's WAL position and waits (convergeWait at
// most) until the target has applied every change up to it. reached is
// false when it did not in time; lag is how far behind it then was. Any
// other failure (the retained-WAL limit, the slot gone) is an error.
func (mig *Migration) reachSource(ctx context.Context, src *pgx.Conn, slot string) (lag int64, reached bool, err error) {
	lsn, err := currentLSN(ctx, src)
	if err != nil {
		return 0, false, err
	}
	wctx, cancel := context.WithTimeout(ctx, convergeWait)
	defer cancel()
	lag, err = mig.waitConfirmed(wctx, src, slot, lsn)
	if err == nil {
		return 0, true, nil
	}
	if ctx.Err() == nil && errors.Is(err, context.DeadlineExceeded) {
		return lag, false, nil
	}
	return lag, false, err
}

// slotLag is the source's current WAL position minus what the slot
// confirmed.
func slotLag(ctx context.Context, src *pgx.Conn, slot string) (int64, error) {
	var lag int64
	err := src.QueryRow(ctx, `SELECT coalesce(pg_current_wal_lsn() - confirmed_flush_lsn, 0)::bigint FROM pg_replication_slots WHERE slot_name = $1`, slot).Scan(&lag)
	return lag, err
}

// primaryKey returns t's primary key column (quoted) and type when it has
// a single-column one, else "".
func primaryKey(ctx context.Context, c *pgx.Conn, t inventory.Table) (string, string, error) {
	var col, typ string
	err := c.QueryRow(ctx, `SELECT a.attname, format_type(a.atttypid, a.atttypmod) FROM pg_index i
JOIN pg_attribute a ON a.attrelid = i.indrelid AND a.attnum = i.indkey[0]
WHERE i.indrelid = $1::regclass AND i.indisprimary AND i.indnkeyatts = 1`, inventory.QualifiedName(t)).Scan(&col, &typ)
	if errors.Is(err, pgx.ErrNoRows) {
		return "", "", nil
	}
	if err != nil {
		return "", "", fmt.Errorf("source: primary key of %s: %w", t.Key(), err)
	}
	return inventory.Ident(col), typ, nil
}

// wholeKey is the one key of a table compared whole.
const wholeKey = "*"

// readRows reads, in one statement, the rows of w's table that keys name
// (nil: all), each key's text mapped to its row's hash ("" with method
// RowCount: presence only). A table without a usable key is read whole:
// one entry, wholeKey, "<count>:<checksum>".
func readRows(ctx context.Context, c *pgx.Conn, w *convTable, keys []string, method string) (map[string]string, error) {
	if w.pk == "" {
		t := w.table
		if err := inventory.Count(ctx, c, &t, method); err != nil {
			return nil, err
		}
		return map[string]string{wholeKey: fmt.Sprintf("%d:%s", t.Rows, t.Checksum)}, nil
	}
	hash := inventory.RowHash
	if method != inventory.MethodChecksum {
		hash = "''"
	}
	q := "SELECT t." + w.pk + "::text, " + hash + " FROM ONLY " + inventory.QualifiedName(w.table) + " AS t"
	var args []any
	if keys != nil {
		q += " WHERE t." + w.pk + " = ANY($1::text[]::" + w.pkType + "[])"
		args = append(args, keys)
	}
	rows, err := c.Query(ctx, q, args...)
	if err != nil {
		return nil, fmt.Errorf("rows of %s: %w", w.table.Key(), err)
	}
	out := map[string]string{}
	for _, k := range keys {
		out[k] = "" // absent unless read
	}
	var k, h string
	_, err = pgx.ForEachRow(rows, []any{&k, &h}, func() error {
		out[k] = "row " + h
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("rows of %s: %w", w.table.Key(), err)
	}
	return out, nil
}

// differing returns the sorted keys whose values differ between a and b
// (a key absent from one is "").
func differing(a, b map[string]string) []string {
	var out []string
	for k, v := range a {
		if b[k] != v {
			out = append(out, k)
		}
	}
	for k, v := range b {
		if _, ok := a[k]; !ok && v != "" {
			out = append(out, k)
		}
	}
	slices.Sort(out)
	return out
}

// finishVerification counts v's states and orders its items: differing
// tables first, then those catching up, then matched ones, each by name.
func finishVerification(v *contract.Verification) {
	rank := map[string]int{contract.StateDiffers: 0, contract.StateCatchingUp: 1, contract.StateMatched: 2}
	slices.SortStableFunc(v.Items, func(x, y contract.TableCheck) int {
		if d := rank[x.State] - rank[y.State]; d != 0 {
			return d
		}
		return strings.Compare(x.Table, y.Table)
	})
	v.Matched, v.Mismatched, v.CatchingUp, v.Rechecks = 0, 0, 0, 0
	for _, it := range v.Items {
		switch it.State {
		case contract.StateMatched:
			v.Matched++
		case contract.StateCatchingUp:
			v.CatchingUp++
		default:
			v.Mismatched++
		}
		v.Rechecks = max(v.Rechecks, it.Rechecks)
	}
}

// convergeSummary says in one sentence how verification ended.
func convergeSummary(v *contract.Verification) string {
	s := fmt.Sprintf("compared at WAL positions the target had applied: %d of %d tables matched", v.Matched, v.Tables)
	if v.Rechecks > 0 {
		s += fmt.Sprintf(" (%d re-checks at most)", v.Rechecks)
	}
	for _, it := range v.Items {
		switch it.State {
		case contract.StateCatchingUp:
			what := fmt.Sprintf("%d row(s) still moving", it.Rows)
			if it.Rows == 0 {
				what = "written through every round, compared whole"
			}
			s += fmt.Sprintf("; %s catching up (%s after %d re-checks, lag %d bytes)", it.Table, what, it.Rechecks, it.LagBytes)
		case contract.StateDiffers:
			if it.Rechecks > 0 {
				s += fmt.Sprintf("; %s differs after %d re-checks (%d row(s) unchanged on the source)", it.Table, it.Rechecks, it.Rows)
			} else {
				s += fmt.Sprintf("; %s differs (%s)", it.Table, it.Reason)
			}
		}
	}
	return s
}

// syncPoll is how often waitReplicated looks at the subscription.
const syncPoll = time.Second

// waitReplicated waits (until ctx ends: the Job's deadline) for a
// Continuous migration's subscription to have synchronised every table,
// and records how long it waited. The lag is not waited for here: under
// a steady write load it never reaches 0; convergeVerify compares at WAL
// positions the target has applied.
func (mig *Migration) waitReplicated(ctx context.Context, src, tgt *pgx.Conn, names contract.Replication, res *contract.MigrationResult) error {
	start := time.Now()
	for {
		st := &contract.MigrationResult{Replication: &contract.Replication{Publication: names.Publication, Subscription: names.Subscription, Slot: names.Slot}}
		if err := mig.fillStatus(ctx, src, tgt, st); err != nil {
			return err
		}
		r := st.Replication
		if err := mig.overRetainedWAL(r.RetainedWALBytes, r.Slot, " while waiting to verify", fmt.Sprintf("lag %d bytes, %d of %d tables synced", r.LagBytes, r.SyncedTables, r.Tables)); err != nil {
			return err
		}
		if r.Tables > 0 && r.SyncedTables == r.Tables {
			res.Actions = append(res.Actions, fmt.Sprintf("waited %s for the subscription to synchronise %d tables before comparing (lag then %d bytes)",
				time.Since(start).Round(time.Millisecond), r.Tables, r.LagBytes))
			return nil
		}
		mig.log.Info("waiting for replication before verifying", "synced", r.SyncedTables, "tables", r.Tables, "lagBytes", r.LagBytes)
		select {
		case <-ctx.Done():
			return fmt.Errorf("replication did not catch up before the step's deadline (%d of %d tables synchronised, lag %d bytes): %w",
				r.SyncedTables, r.Tables, r.LagBytes, ctx.Err())
		case <-time.After(syncPoll):
		}
	}
}
