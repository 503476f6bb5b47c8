package backup

import (
	"context"
	"errors"
	"fmt"
	"time"

	"cairn.dev/agent/contract"
	"cairn.dev/agent/internal/engine"
)

// scratchDropTimeout bounds the drop of a scratch database after a failed
// or interrupted restore: the pod is being stopped (the kubelet's grace
// period is 30 seconds by default), and the stopped restore's sessions may
// still be closing on the server.
const scratchDropTimeout = 20 * time.Second

// dropScratch drops the restore's own scratch database after its checks,
// on a context a stop arriving meanwhile does not cancel (bounded by
// scratchDropTimeout): a database the restore created is never left behind
// because the pod was deleted at that moment.
func (b *Runner) dropScratch(ctx context.Context, tgt engine.Target, marker string, created bool) error {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), scratchDropTimeout)
	defer cancel()
	return tgt.DropTarget(ctx, marker, created)
}

// dropScratchAfterFailure drops the scratch database this restore created
// for a verification (DropTargetAfterChecks) when the restore or its checks
// did not finish — an error, or the pod being stopped (SIGTERM cancels the
// command's context: a namespace or the RestoreJob being deleted) — so an
// interrupted verification leaves no database behind (issue 30). The drop
// runs on a context of its own and is retried while the stopped restore's
// sessions still use the database. What became of it is added to cause,
// in the words of contract.ScratchDropped / contract.ScratchNotDropped, with
// the failure code contract.CodeScratchDropped / CodeScratchNotDropped the
// restore operator reports it by.
func (b *Runner) dropScratchAfterFailure(tgt engine.Target, marker string, created bool, cause error) error {
	db := b.cfg.DB.Database
	if err := dropRetrying(tgt, marker, created); err != nil {
		b.log.Warn("scratch database not dropped after the failed restore", "database", db, "error", err)
		return &contract.CodedError{Code: contract.CodeScratchNotDropped,
			Err: fmt.Errorf("%w; %s (database %q): %v", cause, contract.ScratchNotDropped, db, err)}
	}
	b.log.Info("scratch database dropped after the failed restore", "database", db)
	return &contract.CodedError{Code: contract.CodeScratchDropped, Err: fmt.Errorf("%w; %s (database %q)", cause, contract.ScratchDropped, db)}
}

// dropRetrying drops the restore's own target on a context of its own,
// retried while the stopped restore's sessions still use the database.
func dropRetrying(tgt engine.Target, marker string, created bool) error {
	ctx, cancel := context.WithTimeout(context.Background(), scratchDropTimeout)
	defer cancel()
	for {
		err := tgt.DropTarget(ctx, marker, created)
		if err == nil || errors.Is(err, engine.ErrNotOwn) || ctx.Err() != nil {
			return err
		}
		select {
		case <-ctx.Done():
		case <-time.After(500 * time.Millisecond):
		}
	}
}

// dropCreatedAfterFailure drops the database this restore created when a
// restore that cannot roll back as one transaction (a PostgreSQL
// multi-part artifact's parallel load) failed: no half-restored database
// is left behind.
func (b *Runner) dropCreatedAfterFailure(tgt engine.Target, cause error) error {
	db := b.cfg.DB.Database
	if err := dropRetrying(tgt, "", true); err != nil {
		b.log.Warn("the database the failed restore created was not dropped", "database", db, "error", err)
		return fmt.Errorf("%w; the database %q this restore created holds part of the backup and could not be dropped: %v", cause, db, err)
	}
	b.log.Info("the database the failed restore created was dropped", "database", db)
	return fmt.Errorf("%w; the database %q this restore created was dropped (nothing of the backup is left half-restored)", cause, db)
}
