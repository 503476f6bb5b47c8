package cli

import (
	"context"
	"errors"
	"io"
	"time"

	"cairn.dev/agent/contract"
	"cairn.dev/agent/internal/catalog"
	"cairn.dev/agent/internal/store"
)

// lockedStore writes every Put under S3 Object Lock retention until start
// + the lock days, when the store and the configuration lock; else st.
func (a *app) lockedStore(st store.Store, start time.Time) store.Store {
	l, ok := st.(store.Locker)
	if !ok || l.LockMode() == "" || a.cfg.LockDays < 1 {
		return st
	}
	return retained{Store: st, l: l, until: start.AddDate(0, 0, a.cfg.LockDays)}
}

type retained struct {
	store.Store
	l     store.Locker
	until time.Time
}

func (r retained) Put(ctx context.Context, key string, rd io.Reader) (int64, error) {
	return r.l.PutRetained(ctx, key, rd, r.until)
}

// unlocked returns the expired entries that are not under S3 Object Lock
// at now; each locked one is kept instead (reason contract.KeepLocked in
// ds) and logged: prune never tries to delete a locked object. With a
// store that cannot lock, expired is returned as it is.
func (a *app) unlocked(ctx context.Context, st store.Store, ds []catalog.Decision, expired []catalog.Entry, now time.Time) ([]catalog.Entry, error) {
	l, ok := st.(store.Locker)
	if !ok {
		return expired, nil
	}
	var out []catalog.Entry
	for _, e := range expired {
		until, err := l.LockedUntil(ctx, a.cfg.BackupJob.Key(e.Name))
		if errors.Is(err, store.ErrNotFound) {
			continue // deleted meanwhile (a concurrent prune)
		}
		if err != nil {
			return nil, err
		}
		if !until.After(now) {
			out = append(out, e)
			continue
		}
		a.log.Info("not pruned: the artifact is under S3 Object Lock", "artifact", st.Path(a.cfg.BackupJob.Key(e.Name)), "lockedUntil", until)
		for i := range ds {
			if ds[i].Entry.Name == e.Name {
				ds[i].Reasons = append(ds[i].Reasons, contract.KeepLocked)
			}
		}
	}
	return out, nil
}
