package backup

import (
	"context"
	"errors"
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
// backup writes parts: MySQL with CAIRN_PARALLELISM above 1. eng is told
// to dump as the splitter reads it.
func (b *Runner) multipartName(eng engine.Engine, name string) (string, error) {
	m, ok := eng.(*engine.MySQL)
	if !ok || b.cfg.Parallelism < 2 {
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
	ext := naming.ExtMySQL
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

// restoreParts loads a verified multi-part artifact (parts.Restore).
func (b *Runner) restoreParts(ctx context.Context, st store.Store, entry catalog.Entry, x *parts.Index, ids *crypt.Identities, eng engine.Engine) error {
	b.log.Info("restoring parts", "parts", len(x.Parts), "parallelism", b.cfg.Parallelism)
	return parts.Restore(ctx, st, b.cfg.BackupJob.PartsDir(entry.Name), x, ids, eng, b.cfg.Parallelism, b.log)
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
