package backup

import (
	"context"
	"errors"
	"fmt"
	"time"

	"cairn.dev/agent/contract"
	"cairn.dev/agent/internal/catalog"
	"cairn.dev/agent/internal/crypt"
	"cairn.dev/agent/internal/engine"
	"cairn.dev/agent/internal/inventory"
	"cairn.dev/agent/internal/pitr"
	"cairn.dev/agent/internal/store"
)

// baseFor picks the base of a point-in-time restore: the newest artifact
// that is a base (it records its binary log position) and ended before
// target (any, for the zero target: "latest").
func baseFor(cat *catalog.Catalog, target time.Time) (catalog.Entry, error) {
	var best catalog.Entry
	var oldest time.Time
	found := false
	for _, e := range cat.Entries {
		if e.BinlogBase == nil && e.WALBase == nil {
			continue
		}
		if oldest.IsZero() || e.End.Before(oldest) {
			oldest = e.End
		}
		if !target.IsZero() && e.End.After(target) {
			continue
		}
		if !found || e.Start.After(best.Start) {
			best, found = e, true
		}
	}
	switch {
	case found:
		return best, nil
	case oldest.IsZero():
		return best, errors.New("no backup is a point-in-time base (none was taken with pointInTime on)")
	default:
		return best, fmt.Errorf("%s is before the oldest point-in-time base, which ended at %s: %w",
			target.UTC().Format(time.RFC3339), oldest.UTC().Format(time.RFC3339), pitr.ErrOutsideWindow)
	}
}

// prepareReplay checks that entry can be brought to the configured
// recovery target and fetches the binary log it needs.
func (b *Runner) prepareReplay(ctx context.Context, st store.Store, entry catalog.Entry) (*pitr.Replayer, error) {
	cfg := b.cfg
	if entry.BinlogBase == nil {
		return nil, fmt.Errorf("artifact %s is no point-in-time base (it records no binary log position)", entry.Name)
	}
	if entry.Source == nil || entry.Source.Database == "" {
		return nil, fmt.Errorf("artifact %s does not record the database it was taken of: its binary log cannot be filtered", entry.Name)
	}
	if !cfg.RecoveryTarget.IsZero() && cfg.RecoveryTarget.Before(entry.End) {
		return nil, fmt.Errorf("artifact %s ended at %s, after the recovery target %s: a replay cannot go back; restore to a later time or name an older base: %w",
			entry.Name, entry.End.UTC().Format(time.RFC3339), cfg.RecoveryTarget.Format(time.RFC3339), pitr.ErrOutsideWindow)
	}
	base := pitr.Base{File: entry.BinlogBase.File, Pos: entry.BinlogBase.Pos}
	// Every identity given: a segment archived before a key rotation may
	// need another key than the base.
	// The target server's schemas: a statement of the log on any of them
	// (or on users, grants) refuses the replay before the target is
	// touched (pitr.StatementPolicy).
	live, err := pitr.LiveSchemas(ctx, pitr.Target{Host: cfg.DB.Host, Port: cfg.DB.Port, User: cfg.DB.User, Password: cfg.DB.Password}, "")
	if err != nil {
		return nil, err
	}
	return pitr.PrepareLive(ctx, st, cfg.BackupJob.BinlogDir(), base, cfg.RecoveryTarget, entry.Source.Database, cfg.DB.Database, "", cfg.Identities, live)
}

// Archive streams the source's binary log (MySQL/MariaDB) or write-ahead
// log (PostgreSQL) into the store until ctx ends (`agent archive`, the
// point-in-time archiver).
func (b *Runner) Archive(ctx context.Context) ([]byte, error) {
	cfg := b.cfg
	st, err := b.OpenStore()
	if err != nil {
		return nil, err
	}
	if err := st.Check(ctx); err != nil {
		return nil, err
	}
	health := &archiveHealth{maxLag: cfg.MaxLag, now: b.now}
	if err := health.serve(ctx, cfg.HealthAddr, b.log); err != nil {
		return nil, err
	}
	if cfg.Engine == "postgres" {
		conn := cfg.DB
		if conn.Port == 0 {
			conn.Port = 5432
		}
		if err := engine.CheckConn(conn); err != nil {
			return nil, err
		}
		a := &pitr.WALArchiver{Conn: conn, Store: st, Dir: cfg.BackupJob.WALDir(), Spool: cfg.SpoolDir,
			MaxSegmentAge: cfg.MaxSegmentAge, Slot: pitr.SlotName(cfg.BackupJob.String()),
			MaxRetainedWALBytes: cfg.ArchiveMaxRetainedWALBytes, Recipients: cfg.Recipients, Log: b.log, CaughtUp: health.set}
		b.log.Info("archiving the write-ahead log", "host", conn.Host, "port", conn.Port, "store", st.String(),
			"dir", st.Path(a.Dir), "slot", a.Slot, "maxSegmentAge", cfg.MaxSegmentAge, "encryptedTo", encryptedTo(cfg.Recipients))
		if err := a.Run(ctx); err != nil {
			return nil, err
		}
		return []byte("{\"archive\":\"stopped\"}\n"), nil
	}
	a := &pitr.Archiver{
		Source: pitr.Source{Host: cfg.DB.Host, Port: cfg.DB.Port, User: cfg.DB.User, Password: cfg.DB.Password},
		Store:  st, Dir: cfg.BackupJob.BinlogDir(), Spool: cfg.SpoolDir, MaxSegmentAge: cfg.MaxSegmentAge,
		ReaderID: readerID(cfg.BackupJob.String()), Recipients: cfg.Recipients, Log: b.log, CaughtUp: health.set,
	}
	b.log.Info("archiving the binary log", "host", cfg.DB.Host, "port", cfg.DB.Port, "store", st.String(),
		"dir", st.Path(a.Dir), "maxSegmentAge", cfg.MaxSegmentAge, "encryptedTo", encryptedTo(cfg.Recipients))
	if err := a.Run(ctx); err != nil {
		return nil, err
	}
	return []byte("{\"archive\":\"stopped\"}\n"), nil
}

// encryptedTo is what the archiver's log says of its recipients: their
// fingerprints, or none.
func encryptedTo(r *crypt.Recipients) []string {
	if r == nil {
		return nil
	}
	return r.Fingerprints()
}

// readerID is the server id the archive's reader announces to the source:
// stable per BackupJob, away from the small ids servers usually have.
func readerID(job string) int {
	h := uint32(2166136261)
	for i := 0; i < len(job); i++ {
		h = (h ^ uint32(job[i])) * 16777619
	}
	return 1<<30 + int(h%(1<<20))
}

// pruneBinlog deletes the archived binary log (and WAL) segments no kept
// base can use (those before the oldest kept base's file): the log is kept
// as long as a base that replays it is, and no longer. With no base kept
// it deletes nothing. A segment's record goes first, so the index never
// names a missing object.
func (b *Runner) pruneBinlog(ctx context.Context, st store.Store, kept *catalog.Catalog) (int, error) {
	var binlog, wal []pitr.Base
	for _, e := range kept.Entries {
		if e.BinlogBase != nil {
			binlog = append(binlog, pitr.Base{File: e.BinlogBase.File, Pos: e.BinlogBase.Pos})
		}
		if e.WALBase != nil {
			wal = append(wal, pitr.Base{File: e.WALBase.File})
		}
	}
	n, err := b.pruneLog(ctx, st, b.cfg.BackupJob.BinlogDir(), binlog)
	if err != nil {
		return n, err
	}
	m, err := b.pruneLog(ctx, st, b.cfg.BackupJob.WALDir(), wal)
	return n + m, err
}

func (b *Runner) pruneLog(ctx context.Context, st store.Store, dir string, bases []pitr.Base) (int, error) {
	if len(bases) == 0 {
		return 0, nil
	}
	ix, err := pitr.LoadIndex(ctx, st, dir)
	if err != nil {
		return 0, err
	}
	n := 0
	for _, f := range ix.Prunable(bases) {
		for _, k := range ix.Keys(f) {
			if err := st.Delete(ctx, k); err != nil {
				return n, fmt.Errorf("pruning log segment %s: %w", f, err)
			}
		}
		n++
		b.log.Info("pruned log segment (before every kept base)", "segment", st.Path(dir+"/"+f))
	}
	return n, nil
}

// ArchiveStatus reports the archive (segments, newest, gaps) and, for
// PostgreSQL, the archiver's replication slot on the source, dropping the
// slot when it retains more WAL than CAIRN_ARCHIVE_MAX_RETAINED_WAL_BYTES
// (`agent archive-status`: the operator's watchdog and status). Asked to
// release the slot (CAIRN_ARCHIVE_RELEASE_SLOT), it drops it and returns
// before the store is opened: the release needs none (the operator runs it
// without one for a namespace being deleted), and the report has no
// archive.
func (b *Runner) ArchiveStatus(ctx context.Context) ([]byte, error) {
	cfg := b.cfg
	job := cfg.BackupJob
	dir := job.LogDir(cfg.Engine)
	r := contract.ArchiveStatus{Command: "archive-status", BackupJob: job.String(), Engine: cfg.Engine,
		MaxRetainedWALBytes: cfg.ArchiveMaxRetainedWALBytes}
	if cfg.Engine == "postgres" {
		// The source first: the slot is what can harm it.
		conn := cfg.DB
		if conn.Port == 0 {
			conn.Port = 5432
		}
		db, err := inventory.ConnectPostgres(ctx, conn, "postgres")
		if err != nil {
			return nil, err
		}
		defer db.Close(context.WithoutCancel(ctx))
		limit := cfg.ArchiveMaxRetainedWALBytes
		if cfg.ArchiveReleaseSlot {
			limit = pitr.ReleaseSlot
		}
		rep, err := pitr.WatchSlot(ctx, db, pitr.SlotName(job.String()), limit)
		if err != nil {
			return nil, err
		}
		r.Slot, r.SlotExists, r.RetainedWALBytes, r.MaxSlotWALKeepSize = rep.Slot, rep.Exists, rep.RetainedBytes, rep.MaxSlotWALKeepSize
		r.SlotDropped, r.SlotReleased = rep.Dropped && !cfg.ArchiveReleaseSlot, rep.Dropped && cfg.ArchiveReleaseSlot
		if r.SlotReleased {
			b.log.Info("released the archiver's replication slot (point-in-time off or its BackupJob deleted)", "slot", rep.Slot, "retainedBytes", rep.RetainedBytes)
		} else if rep.Dropped {
			b.log.Warn("dropped the archiver's replication slot: it retained more WAL than the limit", "slot", rep.Slot,
				"retainedBytes", rep.RetainedBytes, "limit", cfg.ArchiveMaxRetainedWALBytes)
		}
		if cfg.ArchiveReleaseSlot {
			return contract.Marshal(r)
		}
	}
	st, err := b.OpenStore()
	if err != nil {
		return nil, err
	}
	r.Dir = st.Path(dir)
	ix, err := pitr.LoadIndex(ctx, st, dir)
	if err != nil {
		return nil, err
	}
	files := ix.Files()
	r.Segments = len(files)
	if len(files) > 0 {
		r.Oldest, r.Newest = files[0], files[len(files)-1]
		n := ix.Segments[r.Newest]
		r.NewestArchivedAt = n.ArchivedAt
		r.LatestCovered = ix.WindowFrom(pitr.Base{File: r.Newest}).Latest
	}
	for _, g := range ix.Gaps() {
		r.Gaps = append(r.Gaps, g.String())
	}
	return contract.Marshal(r)
}
