package backup

import (
	"context"
	"errors"
	"fmt"
	"io"
	"time"

	"cairn.dev/agent/contract"
	"cairn.dev/agent/internal/catalog"
	"cairn.dev/agent/internal/naming"
	"cairn.dev/agent/internal/store"
)

// lockedStore writes every Put under S3 Object Lock retention until start
// + the lock days, when the store and the configuration lock; else st.
func (b *Runner) lockedStore(st store.Store, start time.Time) store.Store {
	l, ok := st.(store.Locker)
	if !ok || l.LockMode() == "" || b.cfg.LockDays < 1 {
		return st
	}
	return retained{Store: st, l: l, until: start.AddDate(0, 0, b.cfg.LockDays)}
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
// ds, with its date) and logged: prune never tries to delete a locked
// object. With a store that cannot lock, expired is returned as it is.
func (b *Runner) unlocked(ctx context.Context, st store.Store, ds []catalog.Decision, expired []catalog.Entry, now time.Time) ([]catalog.Entry, error) {
	l, ok := st.(store.Locker)
	if !ok {
		return expired, nil
	}
	var out []catalog.Entry
	for _, e := range expired {
		lock, err := l.LockOf(ctx, b.cfg.BackupJob.Key(e.Name))
		if errors.Is(err, store.ErrNotFound) {
			continue // deleted meanwhile (a concurrent prune)
		}
		if err != nil {
			return nil, err
		}
		if !lock.Until.After(now) {
			out = append(out, e)
			continue
		}
		b.log.Info("not pruned: the artifact is under S3 Object Lock", "artifact", st.Path(b.cfg.BackupJob.Key(e.Name)), "lockedUntil", lock.Until)
		for i := range ds {
			if ds[i].Entry.Name == e.Name {
				ds[i].Reasons = append(ds[i].Reasons, contract.KeepLocked)
				ds[i].LockedUntil = lock.Until
			}
		}
	}
	return out, nil
}

// extendLocks, when backups are written locked (a lock mode is set), reads
// the lock of every artifact the policy keeps (recorded in ds for the
// report) and extends it to what the calendar tiers keep it at least
// (catalog.KeepUntil): a month's newest backup kept 12 months, written
// locked for the lock days, ends up locked until its 12th month is over.
// The artifact first, then its manifest. A lock is never shortened: an
// artifact locked longer keeps its date. The lock's mode stays the
// object's (the configured one for an artifact not locked yet). Dry run:
// nothing is changed, what would be is logged. The failures are returned
// (the prune goes on: they only keep less locked).
func (b *Runner) extendLocks(ctx context.Context, st store.Store, ds []catalog.Decision, p catalog.Policy, now time.Time) []string {
	l, ok := st.(store.Locker)
	if !ok || l.LockMode() == "" {
		return nil
	}
	job := b.cfg.BackupJob
	var failed []string
	for i := range ds {
		d := &ds[i]
		if len(d.Reasons) == 0 {
			continue
		}
		key := job.Key(d.Entry.Name)
		lock, err := l.LockOf(ctx, key)
		if err != nil {
			if !errors.Is(err, store.ErrNotFound) {
				failed = append(failed, err.Error())
			}
			continue
		}
		d.LockedUntil = lock.Until
		until := catalog.KeepUntil(*d, p, now)
		if until.IsZero() || !until.After(lock.Until) {
			continue
		}
		mode := lock.Mode
		if mode == "" {
			mode = l.LockMode()
		}
		if b.cfg.PruneDryRun {
			b.log.Info("would extend the S3 Object Lock (dry run)", "artifact", st.Path(key), "reasons", d.Reasons, "lockedUntil", lock.Until, "until", until)
			continue
		}
		if err := l.ExtendLock(ctx, key, mode, until); err != nil {
			failed = append(failed, err.Error())
			continue
		}
		d.LockedUntil = until
		b.log.Info("S3 Object Lock extended to what the policy keeps", "artifact", st.Path(key), "reasons", d.Reasons, "mode", mode, "from", lock.Until, "until", until)
		// A multi-part artifact is its index and its parts: a part left
		// unlocked could be deleted, and the artifact with it.
		if naming.Multipart(d.Entry.Name) {
			failed = append(failed, b.extendPartLocks(ctx, st, l, d.Entry.Name, mode, until)...)
		}
		mkey := job.ManifestKey(d.Entry.Name)
		ml, err := l.LockOf(ctx, mkey)
		if err == nil && until.After(ml.Until) {
			if ml.Mode != "" {
				mode = ml.Mode
			}
			err = l.ExtendLock(ctx, mkey, mode, until)
		}
		if err != nil {
			failed = append(failed, fmt.Sprintf("manifest of %s: %v", d.Entry.Name, err))
		}
	}
	return failed
}

// extendPartLocks extends the lock of every part of multi-part artifact
// name to until (never shortening one locked longer), in mode unless the
// part has its own; it returns the failures.
func (b *Runner) extendPartLocks(ctx context.Context, st store.Store, l store.Locker, name, mode string, until time.Time) []string {
	objs, err := st.List(ctx, b.cfg.BackupJob.PartsDir(name))
	if err != nil {
		return []string{fmt.Sprintf("parts of %s: %v", name, err)}
	}
	var failed []string
	for _, o := range objs {
		pl, err := l.LockOf(ctx, o.Key)
		if err == nil && !until.After(pl.Until) {
			continue
		}
		m := mode
		if err == nil && pl.Mode != "" {
			m = pl.Mode
		}
		if err == nil {
			err = l.ExtendLock(ctx, o.Key, m, until)
		}
		if err != nil && !errors.Is(err, store.ErrNotFound) {
			failed = append(failed, fmt.Sprintf("part %s: %v", st.Path(o.Key), err))
		}
	}
	if len(failed) == 0 {
		b.log.Info("S3 Object Lock of the artifact's parts extended", "artifact", name, "parts", len(objs), "until", until)
	}
	return failed
}
