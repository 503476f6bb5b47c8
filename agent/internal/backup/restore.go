package backup

import (
	"context"
	"errors"
	"fmt"
	"time"

	"cairn.dev/agent/contract"
	"cairn.dev/agent/internal/catalog"
	"cairn.dev/agent/internal/checks"
	"cairn.dev/agent/internal/engine"
	"cairn.dev/agent/internal/inventory"
	"cairn.dev/agent/internal/naming"
	"cairn.dev/agent/internal/parts"
	"cairn.dev/agent/internal/pipeline"
	"cairn.dev/agent/internal/pitr"
)

// Restore verifies an artifact (CAIRN_ARTIFACT, default the newest) before
// the target is touched, restores it, runs the configured checks, and
// drops a scratch target afterwards when asked. It returns the result line.
func (b *Runner) Restore(ctx context.Context) (line []byte, err error) {
	cfg := b.cfg
	st, err := b.OpenStore()
	if err != nil {
		return nil, err
	}
	if err := st.Check(ctx); err != nil {
		return nil, err
	}
	cat, _, err := b.LoadIndex(ctx, st)
	if err != nil {
		return nil, err
	}
	job := cfg.BackupJob
	if len(cat.Entries) == 0 {
		return nil, fmt.Errorf("no backups of %s in %s: nothing to restore", job, st)
	}
	var entry catalog.Entry
	pit := cfg.RecoverLatest || !cfg.RecoveryTarget.IsZero()
	if pit && cfg.Artifact == "" {
		if entry, err = baseFor(cat, cfg.RecoveryTarget); err != nil {
			return nil, windowError(fmt.Errorf("%s in %s: %w", job, st, err))
		}
	} else if cfg.Artifact == "" {
		entry, _ = cat.Newest()
	} else {
		var ok bool
		if entry, ok = cat.Find(cfg.Artifact); !ok {
			return nil, fmt.Errorf("artifact %q is not in the catalog of %s in %s (agent list shows what is)", cfg.Artifact, job, st)
		}
	}
	engineName := cfg.Engine
	if engineName == "" {
		engineName = entry.Engine
	} else if engineName != entry.Engine {
		return nil, fmt.Errorf("artifact %s is a %s backup, but the engine is set to %s", entry.Name, entry.Engine, engineName)
	}
	eng, err := engine.New(engineName, cfg.DB)
	if err != nil {
		return nil, err
	}
	key := job.Key(entry.Name)
	start := b.now().Truncate(time.Millisecond)
	// An encrypted artifact needs one of its recipients' identities: say
	// which before reading it, and before the target is touched.
	ids, err := b.IdentitiesFor(st.Path(key), entry)
	if err != nil {
		return nil, err
	}
	b.log.Info("verifying artifact", "artifact", st.Path(key), "size", entry.Size, "checksum", entry.Checksum, "store", st.String(),
		"encryptedTo", entry.EncryptedTo())
	var x *parts.Index
	if naming.Multipart(entry.Name) {
		x, err = b.verifyParts(ctx, st, entry, ids)
	} else {
		err = b.Verify(ctx, st, key, entry, ids)
	}
	if err != nil {
		if errors.Is(err, pipeline.ErrCorrupted) {
			return nil, fmt.Errorf("refusing to restore: %w; the target database was not touched", err)
		}
		return nil, fmt.Errorf("cannot verify %s, the target database was not touched: %w", st.Path(key), err)
	}
	// The target server, and tools of this image that can restore into it
	// (and recover the base), before the target is touched.
	target, err := b.restoreTools(ctx, engineName, entry, pit)
	if err != nil {
		return nil, err
	}
	// Point in time: the whole replay is found and its segments fetched
	// and checked before the target is touched.
	var replay *pitr.Replayer
	var recovery *pitr.Recovery
	switch {
	case naming.PhysicalBase(entry.Name):
		// A PostgreSQL physical base: recovered in a temporary server
		// first (to the target, or to its own consistent point).
		if recovery, err = b.recoverBase(ctx, st, entry, ids, pit); err != nil {
			if pit {
				return nil, windowError(fmt.Errorf("point-in-time restore refused, the target database was not touched: %w", err))
			}
			return nil, fmt.Errorf("recovering the base failed, the target database was not touched: %w", err)
		}
		defer recovery.Close()
	case pit:
		if replay, err = b.prepareReplay(ctx, st, entry); err != nil {
			return nil, windowError(fmt.Errorf("point-in-time restore refused, the target database was not touched: %w", err))
		}
		defer replay.Close()
	}
	b.log.Info("restore started", "engine", eng.Name(), "host", cfg.DB.Host, "port", cfg.DB.Port,
		"database", cfg.DB.Database, "user", cfg.DB.User)
	tgt, ok := eng.(engine.Target)
	if !ok {
		return nil, fmt.Errorf("engine %s cannot prepare a target", eng.Name())
	}
	// Before anything is written: is the target the database the backup
	// was taken of, under whatever address? The servers say.
	if err := b.RefuseRecordedSource(ctx, "restore", engineName, entry, cfg.DB, cfg.AllowOverwriteSource); err != nil {
		return nil, err
	}
	marker := ""
	if cfg.DropTargetAfterChecks {
		marker = ScratchMarker(job)
	}
	own, err := tgt.CreateTarget(ctx, marker)
	if err != nil {
		return nil, fmt.Errorf("prepare target database %q: %w", cfg.DB.Database, err)
	}
	// created: this run created the target (not an earlier attempt).
	created := own
	if own && cfg.DropTargetAfterChecks {
		// A scratch database is dropped on every path to failure too.
		defer func() {
			if err != nil {
				err = b.dropScratchAfterFailure(tgt, marker, created, err)
			}
		}()
	}
	if x != nil {
		err = b.restoreParts(ctx, st, entry, x, ids, eng, created)
		if err != nil && created && !cfg.DropTargetAfterChecks && x.Engine == "postgres" {
			err = b.dropCreatedAfterFailure(tgt, err)
		}
	} else if recovery != nil {
		err = b.restoreRecovered(ctx, recovery, entry, eng)
	} else {
		err = pipeline.Restore(ctx, st, key, entry.Size, entry.Checksum, ids, eng)
	}
	if err != nil {
		return nil, err
	}
	var reached time.Time
	if recovery != nil && pit {
		reached = recovery.Reached()
	}
	if replay != nil {
		b.log.Info("replaying the binary log", "segments", replay.Segments(), "to", replay.Reached())
		if reached, err = replay.Apply(ctx, pitr.Target{Host: cfg.DB.Host, Port: cfg.DB.Port, User: cfg.DB.User, Password: cfg.DB.Password}, ""); err != nil {
			return nil, err
		}
	}
	end := b.now().Truncate(time.Millisecond)
	r := EntryResult(st, key, entry)
	r.RecoveryPoint = reached
	r.Start, r.End, r.DurationSeconds = start, end, Seconds(end.Sub(start))
	r.TargetCreated = own
	r.Server = target
	b.log.Info("restore finished", "artifact", r.Artifact, "durationSeconds", r.DurationSeconds, "targetCreated", own)

	if len(cfg.Checks) > 0 {
		q, err := checks.For(eng, cfg.CheckTimeout)
		if err != nil {
			return nil, err
		}
		r.Checks = checks.Run(ctx, q, cfg.Checks, b.rowCounts(eng, entry))
		for _, c := range r.Checks {
			b.log.Info("check", "name", c.Name, "passed", c.Passed, "value", c.Value, "message", c.Message)
		}
		if ctx.Err() != nil {
			// Stopped (the pod deleted) while the checks ran: no verdict.
			return nil, fmt.Errorf("stopped while the checks ran: %w", ctx.Err())
		}
	}
	if cfg.RecordVerification {
		b.recordVerification(ctx, st, entry, &r)
	}
	if cfg.DropTargetAfterChecks {
		// Only after the checks ran, and only the restore's own target.
		switch {
		case !own:
			r.DropError = engine.ErrNotOwn.Error()
		default:
			if err := b.dropScratch(ctx, tgt, marker, created); err != nil {
				r.DropError = err.Error()
			} else {
				r.TargetDropped = true
			}
		}
		if r.DropError != "" {
			b.log.Warn("target database not dropped", "database", cfg.DB.Database, "reason", r.DropError)
		} else {
			b.log.Info("target database dropped", "database", cfg.DB.Database)
		}
	}
	return contract.MarshalResult(r)
}

// ScratchMarker is recorded on a target database a restore creates to drop
// it after its checks (PostgreSQL: the database's comment), so a retried
// restore from the same catalog key recognises it as its own.
func ScratchMarker(job naming.Job) string {
	return "cairn-agent: scratch database of a verification restore of " + job.String() + "; dropped after its checks"
}

// rowCounts compares the restored tables' row counts with those the backup
// recorded in entry's manifest (its inventory, taken in the dump's
// snapshot). Every recorded table must be in the target with that many
// rows; tables only in the target (a restore into an existing database) are
// not the backup's and are not compared. Nil when the backup recorded no
// row counts (an older agent, or CAIRN_INVENTORY=None).
func (b *Runner) rowCounts(eng engine.Engine, entry catalog.Entry) checks.RowCounts {
	rec := entry.Inventory
	if rec == nil || rec.Method == inventory.MethodList {
		return nil
	}
	var conn engine.Conn
	switch e := eng.(type) {
	case *engine.Postgres:
		conn = e.Conn
	case *engine.MySQL:
		conn = e.Conn
	default:
		return nil
	}
	return func(ctx context.Context) (string, []string, error) {
		got, err := inventory.Take(ctx, eng.Name(), conn, inventory.Options{Method: inventory.MethodRowCount})
		if err != nil {
			return "", nil, fmt.Errorf("counting the restored tables: %w", err)
		}
		var recorded int64
		for _, t := range rec.Tables {
			recorded += t.Rows
		}
		summary := fmt.Sprintf("%d table(s), %d row(s) recorded", len(rec.Tables), recorded)
		var diffs []string
		for _, c := range inventory.Compare(rec, got, inventory.MethodRowCount).Items {
			switch {
			case c.Match || c.SourceRows < 0:
				// equal, or only in the target
			case c.TargetRows < 0:
				diffs = append(diffs, fmt.Sprintf("%s: missing, %d recorded", c.Table, c.SourceRows))
			default:
				diffs = append(diffs, fmt.Sprintf("%s: %d restored, %d recorded", c.Table, c.TargetRows, c.SourceRows))
			}
		}
		return summary, diffs, nil
	}
}
