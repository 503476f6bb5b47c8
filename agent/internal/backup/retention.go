package backup

import (
	"bytes"
	"context"
	"encoding/json"
	"time"

	"cairn.dev/agent/contract"
	"cairn.dev/agent/internal/catalog"
	"cairn.dev/agent/internal/store"
)

// retains reports whether a retention policy is configured: days or tiers.
func (b *Runner) retains() bool { return b.cfg.RetentionDays > 0 || b.cfg.Retention != nil }

// policy is the configured retention policy.
func (b *Runner) policy() catalog.Policy {
	if r := b.cfg.Retention; r != nil {
		return catalog.Policy{Retention: *r, Location: b.cfg.TimeZone}
	}
	return catalog.Policy{Days: b.cfg.RetentionDays}
}

// VerificationKind identifies a verification record.
const VerificationKind = "CairnVerification"

// verification is the record a verification restore writes next to the
// artifact (<job>/verified/<artifact>.json): the artifact restored and
// every check passed. Retention's minVerified keeps the newest such
// artifacts; the record is in the store so it survives a lost cluster.
type verification struct {
	Kind     string    `json:"kind"`
	Version  int       `json:"version"`
	Artifact string    `json:"artifact"`
	Checksum string    `json:"checksum"`
	Time     time.Time `json:"time"`
	Checks   []string  `json:"checks,omitempty"`
}

// recordVerification writes the verification record of entry when the
// restore's checks all passed. A failure to write it is a warning: the
// restore itself worked.
func (b *Runner) recordVerification(ctx context.Context, st store.Store, entry catalog.Entry, r *contract.Result) {
	v := verification{Kind: VerificationKind, Version: 1, Artifact: entry.Name, Checksum: entry.Checksum, Time: b.now()}
	for _, c := range r.Checks {
		if !c.Passed {
			b.log.Info("not recorded as verified: a check failed", "check", c.Name)
			return
		}
		v.Checks = append(v.Checks, c.Name)
	}
	data, _ := json.Marshal(v)
	key := b.cfg.BackupJob.VerifiedKey(entry.Name)
	if _, err := st.Put(ctx, key, bytes.NewReader(append(data, '\n'))); err != nil {
		b.log.Warn("cannot record the verification in the store", "record", st.Path(key), "error", err)
		return
	}
	r.Verified = true
	b.log.Info("verification recorded", "record", st.Path(key))
}
