package backup

import (
	"context"
	"fmt"
	"time"

	"cairn.dev/agent/contract"
	"cairn.dev/agent/internal/catalog"
	"cairn.dev/agent/internal/store"
)

// Delete removes the index (manifests and legacy catalog), then every
// object of the job. It can be repeated until it succeeds. A backup that
// finishes after delete listed the directory stays complete and listed.
func (b *Runner) Delete(ctx context.Context) ([]byte, error) {
	job := b.cfg.BackupJob
	st, err := b.OpenStore()
	if err != nil {
		return nil, err
	}
	if err := st.Check(ctx); err != nil {
		return nil, err
	}
	manifests, err := st.List(ctx, job.EntriesPrefix())
	if err != nil {
		return nil, err
	}
	for i, o := range manifests {
		if err := st.Delete(ctx, o.Key); err != nil {
			return nil, fmt.Errorf("deleted %d of %d manifests: %w", i, len(manifests), err)
		}
	}
	if err := st.Delete(ctx, job.CatalogKey()); err != nil {
		return nil, err
	}
	objs, err := st.List(ctx, job.Dir())
	if err != nil {
		return nil, err
	}
	deleted := 0
	for _, o := range objs {
		if err := st.Delete(ctx, o.Key); err != nil {
			return nil, fmt.Errorf("deleted %d objects, then: %w", deleted, err)
		}
		deleted++
	}
	// The binary log archive (point-in-time recovery) goes with the
	// artifacts: no base is left that could use it.
	segs, err := st.List(ctx, job.BinlogDir())
	if err != nil {
		return nil, err
	}
	wal, err := st.List(ctx, job.WALDir())
	if err != nil {
		return nil, err
	}
	for _, o := range append(segs, wal...) {
		if err := st.Delete(ctx, o.Key); err != nil {
			return nil, fmt.Errorf("deleted %d objects, then: %w", deleted, err)
		}
		deleted++
	}
	n, err := st.AbortIncomplete(ctx, job.Dir(), b.now().Add(time.Hour), nil)
	if err != nil {
		return nil, err
	}
	deleted += n
	if p, ok := st.(*store.PVC); ok {
		if err := p.RemoveDir(job.Dir()); err != nil {
			return nil, err
		}
		if err := p.RemoveDir(job.BinlogDir()); err != nil {
			return nil, err
		}
		if err := p.RemoveDir(job.WALDir()); err != nil {
			return nil, err
		}
	}
	b.log.Info("deleted", "objects", deleted, "store", st.String())
	return contract.Marshal(b.summary("delete", st, catalog.New(job), deleted))
}
