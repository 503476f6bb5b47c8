// Package backup runs the agent's commands on one BackupJob's artifacts in
// its store: backup (dump, compress, encrypt, store, list in the catalog),
// restore (verify, then load, run the checks), list, prune (retention, S3
// Object Lock) and delete. A migration's store transfer (package
// cairn.dev/agent/internal/migrate) writes and reads its artifacts with the
// same pieces.
package backup

import (
	"fmt"
	"io"
	"log/slog"
	"time"

	"cairn.dev/agent/contract"
	"cairn.dev/agent/internal/catalog"
	"cairn.dev/agent/internal/config"
	"cairn.dev/agent/internal/parts"
	"cairn.dev/agent/internal/store"
)

// Runner runs the command of one agent process (see New).
type Runner struct {
	// markerRefresh overrides catalog.MarkerRefresh (tests).
	markerRefresh time.Duration

	cfg     *config.Config
	log     *slog.Logger
	now     func() time.Time
	version string
	stdout  io.Writer

	// written is the index of the multi-part artifact backup wrote, if any.
	written *parts.Index
}

// New returns a Runner for cfg that logs to log, reads the time from now
// (UTC), records version in the manifests it writes, and prints list's
// lines to stdout.
func New(cfg *config.Config, log *slog.Logger, now func() time.Time, version string, stdout io.Writer) *Runner {
	return &Runner{cfg: cfg, log: log, now: now, version: version, stdout: stdout}
}

// OpenStore opens the configured store (CAIRN_STORE).
func (b *Runner) OpenStore() (store.Store, error) {
	switch b.cfg.Store {
	case "pvc":
		return store.NewPVC(b.cfg.PVCPath)
	case "s3":
		return store.NewS3(b.cfg.S3)
	}
	return nil, fmt.Errorf("unknown store %q", b.cfg.Store)
}

// EntryResult is the result line's description of the artifact e, stored
// under key in st.
func EntryResult(st store.Store, key string, e catalog.Entry) contract.Result {
	return contract.Result{
		Artifact:        st.Path(key),
		Size:            e.Size,
		Checksum:        e.Checksum,
		Start:           e.Start,
		End:             e.End,
		DurationSeconds: e.DurationSeconds,
		Engine:          e.Engine,
		Server:          e.Server,
		EncryptedTo:     e.EncryptedTo(),
		Parts:           e.Parts,
		PartsSize:       e.PartsSize,
	}
}

// Seconds is d in seconds, to the millisecond, as result lines report
// durations.
func Seconds(d time.Duration) float64 {
	return float64(d.Milliseconds()) / 1000
}
