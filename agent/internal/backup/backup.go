package backup

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"time"

	"cairn.dev/agent/contract"
	"cairn.dev/agent/internal/catalog"
	"cairn.dev/agent/internal/engine"
	"cairn.dev/agent/internal/inventory"
	"cairn.dev/agent/internal/naming"
	"cairn.dev/agent/internal/pitr"
)

// Backup dumps the database into the store (compressed, checksummed, and
// encrypted when recipients are configured), lists the artifact in the
// catalog by its manifest, and prunes afterwards when a retention is set.
// It returns the result line.
func (b *Runner) Backup(ctx context.Context) ([]byte, error) {
	cfg := b.cfg
	if cfg.Engine == "" {
		return nil, errors.New("engine is not set: CAIRN_ENGINE or --engine must be postgres or mysql")
	}
	eng, err := engine.New(cfg.Engine, cfg.DB)
	if err != nil {
		return nil, err
	}
	st, err := b.OpenStore()
	if err != nil {
		return nil, err
	}
	// Fail early, before dumping anything, if the store is unreachable.
	if err := st.Check(ctx); err != nil {
		return nil, err
	}
	// Then the server, and tools of this image that can dump it.
	server, err := b.dumpTools(ctx)
	if err != nil {
		return nil, err
	}

	job := cfg.BackupJob
	start := b.now().Truncate(time.Millisecond)
	// The token keeps two runs started in the same millisecond (a run-now
	// beside a scheduled run, two clusters sharing a bucket) apart: every
	// run writes objects no other run writes.
	name, err := naming.ArtifactNameToken(job, eng.Name(), start, naming.NewToken())
	if err != nil {
		return nil, err
	}
	if m, ok := eng.(*engine.MySQL); ok && cfg.PointInTime {
		m.BinlogPosition = true
	}
	invOpts := inventory.Options{Method: cfg.Inventory}
	if pg, ok := eng.(*engine.Postgres); ok && cfg.PointInTime {
		// A physical base of the cluster (docs/pitr.md): no snapshot to
		// count rows in.
		eng = &engine.PostgresBase{Conn: pg.Conn}
		invOpts.Method = "None"
		if name, err = naming.ToBase(name); err != nil {
			return nil, err
		}
	}
	if name, err = b.multipartName(eng, name); err != nil {
		return nil, err
	}
	if cfg.Recipients != nil {
		name += naming.ExtEncrypted
	}
	key := job.Key(name)
	b.log.Info("backup started", "engine", eng.Name(), "host", cfg.DB.Host, "port", cfg.DB.Port,
		"database", cfg.DB.Database, "user", cfg.DB.User, "store", st.String(), "artifact", st.Path(key))

	// The marker tells a concurrent prune that this artifact (and its
	// upload) is being written; it is removed only once the manifest lists
	// the artifact.
	stopMarker, err := b.StartMarker(ctx, st, name, start)
	if err != nil {
		return nil, err
	}
	defer func() {
		if stopMarker != nil {
			stopMarker()
		}
	}()

	// With S3 Object Lock, the artifact and its manifest are written locked
	// (until start + the lock days); markers are not.
	locked := b.lockedStore(st, start)
	w, inv, invErr, err := b.DumpWithInventory(ctx, eng, cfg.DB, locked, key, invOpts)
	if err != nil {
		return nil, err
	}
	if invErr != nil {
		// The backup is good without it; restores cannot check row counts.
		b.log.Warn("backup has no inventory", "error", invErr)
	}
	end := b.now().Truncate(time.Millisecond)
	entry := catalog.Entry{
		Name:            name,
		Size:            w.Size,
		Checksum:        w.Checksum,
		Start:           start,
		End:             end,
		DurationSeconds: Seconds(end.Sub(start)),
		Engine:          eng.Name(),
		Server:          server,
		Format:          eng.Format(),
		Compression:     "zstd",
		AgentVersion:    b.version,
		Inventory:       inv,
		Source:          b.RecordIdentity(ctx, eng.Name(), cfg.DB),
	}
	if cfg.Recipients != nil {
		entry.Encryption = cfg.Recipients.Record()
	}
	if m, ok := eng.(*engine.MySQL); ok && m.BinlogPosition {
		if base, err := pitr.ReadBase(bytes.NewReader(m.Head)); err != nil {
			b.log.Warn("the backup is good but is no point-in-time base", "error", err)
		} else {
			entry.BinlogBase = &catalog.BinlogBase{File: base.File, Pos: base.Pos}
			b.log.Info("point-in-time base", "binlogFile", base.File, "binlogPos", base.Pos)
		}
	}
	if pb, ok := eng.(*engine.PostgresBase); ok {
		label, err := pitr.ParseBackupLabel(pb.BackupLabel())
		if err != nil {
			return nil, fmt.Errorf("artifact %s was written but is no usable base: %w", st.Path(key), err)
		}
		entry.WALBase = &catalog.WALBase{File: label.File, StartLSN: label.StartLSN.String(), Timeline: label.Timeline,
			StartTime: label.StartTime, User: cfg.DB.User, Database: cfg.DB.Database}
		b.log.Info("point-in-time base", "walFile", label.File, "startLSN", label.StartLSN, "timeline", label.Timeline)
	}
	b.recordParts(&entry)
	b.log.Info("artifact written", "artifact", st.Path(key), "size", w.Size, "checksum", w.Checksum,
		"encryptedTo", entry.EncryptedTo(), "parts", entry.Parts, "partsSize", entry.PartsSize)

	// Only now, with the artifact complete, is it listed: its own
	// manifest, which no other run writes or rewrites.
	if err := b.WriteManifest(ctx, locked, entry); err != nil {
		return nil, fmt.Errorf("artifact %s was written but is not listed: %w", st.Path(key), err)
	}
	stopMarker()
	stopMarker = nil
	b.log.Info("artifact listed", "manifest", st.Path(job.ManifestKey(name)))

	res := EntryResult(st, key, entry)
	if b.retains() && cfg.Prune {
		s, err := b.pruneStore(ctx, st)
		if err != nil {
			b.log.Warn("prune after backup failed; the backup itself succeeded", "error", err)
		}
		res.Retention = s.Retention
	}
	if entry.BinlogBase != nil || entry.WALBase != nil {
		if res.PointInTime, err = b.pointInTimeWindow(ctx, st); err != nil {
			b.log.Warn("reading the point-in-time window failed; the backup itself succeeded", "error", err)
		}
	}
	return contract.MarshalResult(res)
}
