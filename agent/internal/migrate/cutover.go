package migrate

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"cairn.dev/agent/contract"
	"cairn.dev/agent/internal/config"
	"cairn.dev/agent/internal/inventory"
)

// cutoverStep is the source side of a cutover, all or nothing:
//
//  1. with CAIRN_CUTOVER_SOURCE_READ_ONLY, the writes stop: the source is
//     made read-only and its other sessions are ended;
//  2. in Full mode with verification, the source (writes stopped, by step 1
//     or by the user's declaration) is compared again with the target — the
//     live target (direct) or the inventory the target was verified against
//     (store: CAIRN_ARTIFACT) — so a row written after verification is never
//     left behind. Direct transfer: the tables that differ are copied
//     again (the writes are stopped, so they cannot change under the copy)
//     and compared again; `recopied` and `actions` name them. Store
//     transfer (or a difference left after copying again): the difference
//     is reported in `verification` (exit 0, the operator decides, and
//     switches nothing);
//  3. when step 1 or 2 fails, or 2 ends with a difference, the read-only of
//     step 1 is undone before the step ends, and `actions` says so.
//
// What else cutover does — switching a Secret, stopping replication — is
// the operator's and later steps'.
func (mig *Migration) cutoverStep(ctx context.Context, res *contract.MigrationResult) error {
	if _, err := mig.target(); err == nil {
		if err := mig.refuseSamePair(ctx, "cut over"); err != nil {
			return err
		}
	}
	m := mig.cfg.Migrate
	check := m.Mode == "Full" && m.Verify != "None"
	if !m.SourceReadOnly && !check {
		res.Actions = append(res.Actions, "none: CAIRN_CUTOVER_SOURCE_READ_ONLY is not true and there is nothing to compare (mode "+m.Mode+", verify "+m.Verify+")")
		return nil
	}
	sc, err := mig.source()
	if err != nil {
		return err
	}
	readOnly := false
	undo := func(why string) {
		if !readOnly {
			return
		}
		if err := mig.revertReadOnly(context.WithoutCancel(ctx), sc); err != nil {
			res.Actions = append(res.Actions, fmt.Sprintf("%s, but making the source writable again failed: %v", why, err))
			mig.log.Error("could not undo the source's read-only", "error", err)
			return
		}
		res.Actions = append(res.Actions, why+": the source database "+sc.Database+" was made writable again")
	}
	if m.SourceReadOnly {
		switch mig.cfg.Engine {
		case "postgres":
			readOnly, err = mig.pgReadOnly(ctx, sc, res)
		case "mysql":
			readOnly, err = mig.myReadOnly(ctx, sc, res)
		default:
			err = fmt.Errorf("unknown engine %q", mig.cfg.Engine)
		}
		if err != nil {
			undo("making the source read-only failed halfway")
			return mig.withUndone(err, res)
		}
	}
	if !check {
		return nil
	}
	v, err := mig.compareSourceAgain(ctx, sc)
	if err != nil {
		undo("the source could not be compared with the target")
		return mig.withUndone(fmt.Errorf("comparing the source with the target after writes stopped: %w", err), res)
	}
	res.Verification, res.Tables = v, v.Tables
	if v.Mismatched > 0 && (readOnly || m.WritersStopped) && mig.cfg.Artifact == "" {
		// Back to copying, under the stopped writes: what changed since
		// verification is copied again, then compared again exactly.
		changed := inventory.Mismatched(v)
		mig.log.Info("the source changed since verification; copying those tables again", "tables", strings.Join(changed, ", "))
		tc, err := mig.target()
		if err != nil {
			undo("the target is not configured")
			return mig.withUndone(err, res)
		}
		recopied, err := mig.recopyChanged(ctx, sc, tc, changed)
		if err != nil {
			undo("copying again the tables changed since verification failed; nothing may be switched")
			return mig.withUndone(fmt.Errorf("copying again the tables changed since verification (%s): %w", strings.Join(changed, ", "), err), res)
		}
		res.Recopied = recopied
		what := fmt.Sprintf("%d tables", len(recopied))
		if len(recopied) == 1 {
			what = "1 table"
		}
		res.Actions = append(res.Actions, "re-copied "+what+" changed since verification: "+strings.Join(recopied, ", "))
		if v, err = mig.compareSourceAgain(ctx, sc); err != nil {
			undo("the source could not be compared with the target after copying again")
			return mig.withUndone(fmt.Errorf("comparing the source with the target after copying again: %w", err), res)
		}
		res.Verification, res.Tables = v, v.Tables
	}
	if v.Mismatched > 0 {
		bad := inventory.Mismatched(v)
		mig.log.Warn("the source changed since verification", "tables", strings.Join(bad, ", "))
		undo("the source changed since verification (" + strings.Join(bad, ", ") + "); nothing may be switched")
		return nil
	}
	res.Actions = append(res.Actions, fmt.Sprintf("compared the source again after writes stopped: %d table(s) equal to the target (%s)", v.Tables, v.Method))
	return nil
}

// withUndone adds what the step undid to a failure's message (the
// termination message carries only the error).
func (mig *Migration) withUndone(err error, res *contract.MigrationResult) error {
	for _, act := range res.Actions {
		if strings.Contains(act, "writable again") {
			return fmt.Errorf("%w; %s", err, act)
		}
	}
	return err
}

// abortStep undoes what the migration did to the source, on the way to
// Failed (or on deletion): the replication objects (Continuous: the
// subscription on the target when it is reachable; the slot and the
// publication on the source always — an inactive slot retains WAL without
// bound) and, with CAIRN_CUTOVER_SOURCE_READ_ONLY, the read-only a cutover
// may have set. It never touches data; every part is skipped when absent,
// so it can be repeated.
func (mig *Migration) abortStep(ctx context.Context, res *contract.MigrationResult) error {
	m := mig.cfg.Migrate
	sc, err := mig.source()
	if err != nil {
		return err
	}
	var errs []error
	if m.Mode == "Continuous" {
		if mig.cfg.Engine != "postgres" {
			return &config.UsageError{Msg: "Continuous mode is PostgreSQL only"}
		}
		names, err := mig.replicationNames()
		if err != nil {
			return err
		}
		res.Replication = &names
		if err := mig.dropReplication(ctx, sc, res, false); err != nil {
			errs = append(errs, err)
		}
	}
	if m.SourceReadOnly {
		if err := mig.revertReadOnly(ctx, sc); err != nil {
			errs = append(errs, fmt.Errorf("making the source writable again: %w", err))
		} else {
			res.Actions = append(res.Actions, "source database "+sc.Database+" is writable (cutover's read-only undone, if it was set)")
		}
	}
	if len(res.Actions) == 0 && len(errs) == 0 {
		res.Actions = append(res.Actions, "nothing to undo on the source")
	}
	return errors.Join(errs...)
}
