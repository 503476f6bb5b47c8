package migrate

import (
	"context"
	"fmt"
	"strings"

	"cairn.dev/agent/contract"
	"cairn.dev/agent/internal/engine"
	"cairn.dev/agent/internal/inventory"
)

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
		// (converge.go).
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

// exactCheck is a Continuous cutover's comparison, run by replication-stop
// once the writes are stopped, the target has applied every change up to
// the source's WAL position read after the stop, and the subscription is
// disabled: nothing moves on either side, so source and target must be
// equal exactly — counts and (verify Checksum) checksums of every table.
// A difference is reported in res.Verification (differs true): the step
// then drops nothing, and the operator fails the migration without
// switching (its abort drops the replication objects and undoes the
// read-only). verify None skips it.
func (mig *Migration) exactCheck(ctx context.Context, sc engine.Conn, res *contract.MigrationResult) (differs bool, err error) {
	if mig.cfg.Migrate.Verify == "None" || mig.cfg.Migrate.Verify == "" {
		res.Actions = append(res.Actions, "no exact comparison at cutover: verify is None")
		return false, nil
	}
	v, err := mig.compareSourceAgain(ctx, sc)
	if err != nil {
		return false, fmt.Errorf("comparing the source with the target at cutover: %w", err)
	}
	for i := range v.Items {
		v.Items[i].State = contract.StateMatched
		if !v.Items[i].Match {
			v.Items[i].State = contract.StateDiffers
		}
	}
	res.Verification, res.Tables = v, v.Tables
	if v.Mismatched > 0 {
		bad := inventory.Mismatched(v)
		mig.log.Warn("the target differs from the source at cutover", "tables", strings.Join(bad, ", "))
		res.Actions = append(res.Actions, fmt.Sprintf("the target differs from the source after applying every change written before the stop: %s; replication was not stopped (subscription disabled)",
			strings.Join(bad, ", ")))
		return true, nil
	}
	res.Actions = append(res.Actions, fmt.Sprintf("compared exactly after the target caught up, writes stopped: %d table(s) equal (%s)", v.Tables, v.Method))
	return false, nil
}

// compareSourceAgain compares the source as it is now with what the target
// holds: the live target (direct), or the inventory the target was
// verified against (store transfer: the export's, CAIRN_ARTIFACT).
func (mig *Migration) compareSourceAgain(ctx context.Context, sc engine.Conn) (*contract.Verification, error) {
	method := mig.cfg.Migrate.Verify
	var copied *inventory.Inventory
	if mig.cfg.Artifact != "" {
		entry, _, err := mig.migrationArtifact(ctx)
		if err != nil {
			return nil, err
		}
		if entry.Inventory == nil || entry.Inventory.Method == inventory.MethodList {
			return nil, fmt.Errorf("artifact %s has no inventory to compare with", entry.Name)
		}
		copied = entry.Inventory
		if copied.Method == inventory.MethodRowCount {
			method = inventory.MethodRowCount
		}
	}
	src, err := inventory.Take(ctx, mig.cfg.Engine, sc, mig.invOptions(method))
	if err != nil {
		return nil, fmt.Errorf("source: %w", err)
	}
	if copied == nil {
		tc, err := mig.target()
		if err != nil {
			return nil, err
		}
		if copied, err = inventory.Take(ctx, mig.cfg.Engine, tc, mig.invOptions(method)); err != nil {
			return nil, fmt.Errorf("target: %w", err)
		}
	}
	return inventory.Compare(src, copied, method), nil
}
