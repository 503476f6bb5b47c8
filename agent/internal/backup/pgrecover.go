package backup

import (
	"context"
	"fmt"
	"io"
	"os"
	"time"

	"cairn.dev/agent/internal/catalog"
	"cairn.dev/agent/internal/crypt"
	"cairn.dev/agent/internal/engine"
	"cairn.dev/agent/internal/pipeline"
	"cairn.dev/agent/internal/pitr"
	"cairn.dev/agent/internal/store"
)

// recoverBase brings a PostgreSQL physical base to the configured recovery
// target (or, without one, to its own consistent point) in a temporary
// server inside this pod — all before the target is touched: the archive's
// chain is checked segment by segment, the base unpacked, the server
// recovered and promoted. pit: a recovery target was asked for.
func (b *Runner) recoverBase(ctx context.Context, st store.Store, entry catalog.Entry, ids *crypt.Identities, pit bool) (_ *pitr.Recovery, err error) {
	cfg := b.cfg
	if entry.WALBase == nil {
		return nil, fmt.Errorf("artifact %s is a physical base without its WAL start", entry.Name)
	}
	if pit && !cfg.RecoveryTarget.IsZero() && cfg.RecoveryTarget.Before(entry.End) {
		return nil, fmt.Errorf("artifact %s ended at %s, after the recovery target %s: a recovery cannot go back; restore to a later time or name an older base: %w",
			entry.Name, entry.End.UTC().Format(time.RFC3339), cfg.RecoveryTarget.Format(time.RFC3339), pitr.ErrOutsideWindow)
	}
	rec, err := pitr.PrepareRecovery(ctx, st, cfg.BackupJob.WALDir(), entry.WALBase.File, cfg.RecoveryTarget, !pit, cfg.Identities, b.log)
	if err != nil {
		return nil, err
	}
	defer func() {
		if err != nil {
			rec.Close()
		}
	}()
	rec.User = entry.WALBase.User
	b.log.Info("unpacking the base into a temporary data directory", "artifact", entry.Name, "segments", len(rec.Segments()))
	unpack := &unpacker{rec: rec}
	if err := pipeline.Restore(ctx, st, cfg.BackupJob.Key(entry.Name), entry.Size, entry.Checksum, ids, unpack); err != nil {
		return nil, err
	}
	bin, err := os.Executable()
	if err != nil {
		return nil, err
	}
	target := "the base's consistent point"
	switch {
	case !cfg.RecoveryTarget.IsZero():
		target = cfg.RecoveryTarget.Format(time.RFC3339)
	case pit:
		target = "the end of the archive"
	}
	b.log.Info("recovering in a temporary server", "dataDir", rec.DataDir, "target", target)
	if err := rec.Start(ctx, bin); err != nil {
		return nil, fmt.Errorf("recovery to %s: %w", target, err)
	}
	b.log.Info("recovered", "target", target, "segmentsFetched", len(rec.Fetched()), "superuser", rec.Superuser)
	return rec, nil
}

// restoreRecovered copies the base's database out of the recovered
// temporary server into the target: pg_dump | pg_restore, nothing stored
// in between.
func (b *Runner) restoreRecovered(ctx context.Context, rec *pitr.Recovery, entry catalog.Entry, eng engine.Engine) error {
	conn := rec.Conn(rec.Superuser)
	conn.Database = entry.WALBase.Database
	src := &engine.Postgres{Conn: conn, MaintenanceDB: "postgres", Options: pitr.SessionOptions}
	return engine.Pipe(ctx, src.Dump, eng.Restore, nil)
}

// unpacker is the engine side of pipeline.Restore for a base: it unpacks
// the tar stream.
type unpacker struct{ rec *pitr.Recovery }

func (u *unpacker) Name() string                          { return "postgres" }
func (u *unpacker) Format() string                        { return "pg_basebackup-tar" }
func (u *unpacker) Dump(context.Context, io.Writer) error { return engine.ErrPhysicalBase }
func (u *unpacker) Prepare(context.Context) error         { return nil }
func (u *unpacker) Restore(ctx context.Context, r io.Reader) error {
	return u.rec.Unpack(ctx, r)
}
