package backup

import (
	"context"
	"errors"
	"fmt"
	"path"
	"slices"
	"strings"

	"cairn.dev/agent/contract"
	"cairn.dev/agent/internal/catalog"
	"cairn.dev/agent/internal/store"
)

// Prune deletes what the retention policy does not keep (prunes the store)
// and returns the summary line.
func (b *Runner) Prune(ctx context.Context) ([]byte, error) {
	if !b.retains() {
		return nil, errors.New("no retention is set: CAIRN_RETENTION_DAYS (--retention-days) must be at least 1, or CAIRN_RETENTION (--retention) a calendar-tier policy")
	}
	st, err := b.OpenStore()
	if err != nil {
		return nil, err
	}
	if err := st.Check(ctx); err != nil {
		return nil, err
	}
	s, err := b.pruneStore(ctx, st)
	if err != nil {
		return nil, err
	}
	return contract.MarshalSummary(s)
}

// pruneStore removes expired artifacts (never the newest) and leftovers of
// interrupted backups. A manifest is deleted before its artifact, so the
// index never lists a deleted artifact; what a prune sees as unlisted,
// in progress or just finished is kept (catalog.Sweep).
func (b *Runner) pruneStore(ctx context.Context, st store.Store) (contract.Summary, error) {
	job := b.cfg.BackupJob
	now := b.now()
	cat, l, err := b.LoadIndex(ctx, st)
	if err != nil {
		return contract.Summary{}, err
	}
	policy := b.policy()
	decisions := catalog.Apply(cat.Entries, l.Verified(job), policy, now)
	expired := catalog.Pruned(decisions)
	// What the tiers keep longer than its lock is locked longer.
	lockFailed := b.extendLocks(ctx, st, decisions, policy, now)
	// An artifact still under S3 Object Lock is never deleted: kept, and
	// said so.
	if expired, err = b.unlocked(ctx, st, decisions, expired, now); err != nil {
		return contract.Summary{}, err
	}
	report := catalog.Report(decisions, policy, b.cfg.PruneDryRun)
	for _, k := range report.Kept {
		b.log.Debug("kept", "artifact", k.Artifact, "reasons", k.Reasons)
	}
	if b.cfg.PruneDryRun {
		for _, e := range expired {
			b.log.Info("would prune (dry run)", "artifact", st.Path(job.Key(e.Name)), "start", e.Start)
		}
		s := b.summary("prune", st, cat, 0)
		s.Retention = report
		if len(lockFailed) > 0 {
			return s, fmt.Errorf("cannot read the S3 Object Lock of kept artifacts: %s", strings.Join(lockFailed, "; "))
		}
		return s, nil
	}
	deleted := 0
	var failed []string
	gone := map[string]bool{}
	for _, e := range expired {
		// Manifest first: the artifact stops being listed before it goes.
		if err := st.Delete(ctx, job.ManifestKey(e.Name)); err != nil {
			failed = append(failed, err.Error())
			continue
		}
		if err := st.Delete(ctx, job.Key(e.Name)); err != nil {
			// Unlisted now; a later prune sweeps it as a leftover.
			failed = append(failed, err.Error())
			continue
		}
		if err := b.deleteParts(ctx, st, e.Name); err != nil {
			failed = append(failed, err.Error()) // swept later, as above
			continue
		}
		gone[e.Name] = true
		deleted++
		b.log.Info("pruned", "artifact", st.Path(job.Key(e.Name)), "start", e.Start)
		// Its verification record, if any (else a later prune sweeps it).
		if err := st.Delete(ctx, job.VerifiedKey(e.Name)); err != nil {
			b.log.Warn("cannot delete the verification record of a pruned artifact", "error", err)
		}
	}
	if len(failed) > 0 {
		s := b.summary("prune", st, cat.Without(names(expired), now), deleted)
		s.Retention = report
		return s, fmt.Errorf("expired artifacts not deleted: %s", strings.Join(failed, "; "))
	}
	cat = cat.Without(names(expired), now)
	// Expired artifacts were deleted above: leave them out of the sweep.
	l.Objects = slices.DeleteFunc(l.Objects, func(o catalog.Object) bool {
		n, _ := catalog.ManifestName(job, o.Key)
		p, _ := job.PartOf(o.Key)
		return gone[path.Base(o.Key)] || gone[n] || gone[p]
	})
	for _, o := range catalog.Sweep(job, l, now) {
		if err := st.Delete(ctx, o.Key); err != nil {
			return contract.Summary{}, err
		}
		deleted++
		b.log.Info("removed leftover", "object", st.Path(o.Key), "modified", o.ModTime)
	}
	n, err := st.AbortIncomplete(ctx, job.Dir(), now.Add(-catalog.LeftoverGrace), func(key string) bool {
		return catalog.KeepUpload(job, l.Markers, key, now)
	})
	if err != nil {
		return contract.Summary{}, err
	}
	deleted += n
	segs, err := b.pruneBinlog(ctx, st, cat)
	if err != nil {
		return contract.Summary{}, err
	}
	deleted += segs
	b.log.Info("prune finished", "retentionDays", b.cfg.RetentionDays, "retention", b.cfg.Retention, "deleted", deleted, "kept", len(cat.Entries))
	s := b.summary("prune", st, cat, deleted)
	s.Retention = report
	if len(lockFailed) > 0 {
		return s, fmt.Errorf("S3 Object Lock not extended to what the policy keeps: %s", strings.Join(lockFailed, "; "))
	}
	return s, nil
}

func names(es []catalog.Entry) []string {
	out := make([]string, len(es))
	for i, e := range es {
		out[i] = e.Name
	}
	return out
}
