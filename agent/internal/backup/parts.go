package backup

import (
	"context"
	"errors"
	"fmt"
	"path"

	"cairn.dev/agent/internal/catalog"
	"cairn.dev/agent/internal/crypt"
	"cairn.dev/agent/internal/engine"
	"cairn.dev/agent/internal/naming"
	"cairn.dev/agent/internal/parts"
	"cairn.dev/agent/internal/pipeline"
	"cairn.dev/agent/internal/store"
)

// multipartName turns a new artifact's name into a multi-part one when the
// backup writes parts: a logical backup with CAIRN_PARALLELISM above 1.
// A MySQL eng is told to dump as the splitter reads it.
func (b *Runner) multipartName(eng engine.Engine, name string) (string, error) {
	if b.cfg.Parallelism < 2 {
		return name, nil
	}
	if pg, ok := eng.(*engine.Postgres); ok && len(pg.Select) == 0 {
		// A point-in-time base is a physical one (engine.PostgresBase).
		return naming.ToParts(name)
	}
	m, ok := eng.(*engine.MySQL)
	if !ok {
		return name, nil
	}
	if b.cfg.PointInTime {
		// A base is one stream: mysqldump records the position of its one
		// snapshot.
		b.log.Info("point-in-time base: one stream, not a multi-part artifact", "parallelism", b.cfg.Parallelism)
		return name, nil
	}
	m.ForParts = true
	return naming.ToParts(name)
}

// writeArtifact stores eng's dump under key: one stream
// (pipeline.Backup), or, when key names a multi-part artifact, its parts
// and its index (parts.Backup; the index is kept in b.written).
func (b *Runner) writeArtifact(ctx context.Context, eng engine.Engine, st store.Store, key string, enc pipeline.Encoding) (pipeline.Written, error) {
	if !naming.Multipart(path.Base(key)) {
		return pipeline.Backup(ctx, eng, st, key, enc)
	}
	ext := naming.PartExtension(path.Base(key))
	if enc.Recipients != nil {
		ext += naming.ExtEncrypted
	}
	w, x, err := parts.Backup(ctx, []engine.Engine{eng}, st, key, key+naming.PartsDirSuffix, enc, parts.Options{Parallelism: b.cfg.Parallelism, PartSize: b.cfg.PartSize, Extension: ext})
	b.written = x
	return w, err
}

// recordParts notes a multi-part artifact's parts in its entry.
func (b *Runner) recordParts(e *catalog.Entry) {
	if x := b.written; x != nil {
		e.Parts, e.PartsSize = len(x.Parts), x.Stored()
	}
}

// verifyParts is verify for a multi-part artifact, before the target is
// touched: the index against the manifest, every part present with its
// size, and the schema part read whole (decrypted with ids).
func (b *Runner) verifyParts(ctx context.Context, st store.Store, entry catalog.Entry, ids *crypt.Identities) (*parts.Index, error) {
	job := b.cfg.BackupJob
	key := job.Key(entry.Name)
	x, err := parts.ReadIndex(ctx, st, key, entry.Size, entry.Checksum)
	if err != nil {
		return nil, err
	}
	err = parts.Check(ctx, st, job.PartsDir(entry.Name), x, ids)
	if errors.Is(err, pipeline.ErrNoIdentityMatch) {
		return nil, annotateUntouched(crypt.Mismatch(st.Path(key), entry.Encryption, ids))
	}
	return x, err
}

// restoreParts loads a verified multi-part artifact (parts.Restore,
// parts.PGRestore). created: this run created the (empty) target.
func (b *Runner) restoreParts(ctx context.Context, st store.Store, entry catalog.Entry, x *parts.Index, ids *crypt.Identities, eng engine.Engine, created bool) error {
	b.log.Info("restoring parts", "parts", len(x.Parts), "parallelism", b.cfg.Parallelism)
	dir := b.cfg.BackupJob.PartsDir(entry.Name)
	if pg, ok := eng.(*engine.Postgres); ok {
		if x.Engine != pg.Name() {
			return fmt.Errorf("%w: the parts index of %s says engine %q", pipeline.ErrCorrupted, entry.Name, x.Engine)
		}
		return parts.PGRestore(ctx, st, dir, x, ids, pg, b.cfg.Parallelism, created, b.log)
	}
	return parts.Restore(ctx, st, dir, x, ids, eng, b.cfg.Parallelism, b.log)
}

// deleteParts deletes a multi-part artifact's parts (after its index, so
// that it is no longer restorable first); what fails, a later prune
// sweeps.
func (b *Runner) deleteParts(ctx context.Context, st store.Store, name string) error {
	if !naming.Multipart(name) {
		return nil
	}
	dir := b.cfg.BackupJob.PartsDir(name)
	objs, err := st.List(ctx, dir)
	if err != nil {
		return err
	}
	for _, o := range objs {
		if err := st.Delete(ctx, o.Key); err != nil {
			return err
		}
	}
	if p, ok := st.(*store.PVC); ok {
		return p.RemoveDir(dir)
	}
	return nil
}
