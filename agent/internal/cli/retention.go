package cli

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
func (a *app) retains() bool { return a.cfg.RetentionDays > 0 || a.cfg.Retention != nil }

// policy is the configured retention policy.
func (a *app) policy() catalog.Policy {
	if r := a.cfg.Retention; r != nil {
		return catalog.Policy{Retention: *r, Location: a.cfg.TimeZone}
	}
	return catalog.Policy{Days: a.cfg.RetentionDays}
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
func (a *app) recordVerification(ctx context.Context, st store.Store, entry catalog.Entry, r *contract.Result) {
	v := verification{Kind: VerificationKind, Version: 1, Artifact: entry.Name, Checksum: entry.Checksum, Time: a.now()}
	for _, c := range r.Checks {
		if !c.Passed {
			a.log.Info("not recorded as verified: a check failed", "check", c.Name)
			return
		}
		v.Checks = append(v.Checks, c.Name)
	}
	b, _ := json.Marshal(v)
	key := a.cfg.BackupJob.VerifiedKey(entry.Name)
	if _, err := st.Put(ctx, key, bytes.NewReader(append(b, '\n'))); err != nil {
		a.log.Warn("cannot record the verification in the store", "record", st.Path(key), "error", err)
		return
	}
	r.Verified = true
	a.log.Info("verification recorded", "record", st.Path(key))
}
