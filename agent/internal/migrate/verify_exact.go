package migrate

import (
	"context"
	"fmt"
	"strings"

	"cairn.dev/agent/contract"
	"cairn.dev/agent/internal/engine"
	"cairn.dev/agent/internal/inventory"
)

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
