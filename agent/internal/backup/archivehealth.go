package backup

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"strconv"
	"sync/atomic"
	"time"

	"cairn.dev/agent/contract"
)

// archiveHealth is the archiver's readiness: ready while everything the
// source wrote more than maxLag ago is archived (the last caught-up time,
// pitr.Archiver.CaughtUp, is within maxLag). The archiver Deployment's
// readiness probe reads it (contract.ArchiverReadyPath), so a stalled or
// lagging archiver shows as an unavailable Deployment and the BackupJob's
// PointInTimeReady condition turns False.
type archiveHealth struct {
	maxLag   time.Duration
	now      func() time.Time
	caughtUp atomic.Int64 // unix nanoseconds; 0: not yet
}

func (h *archiveHealth) set(t time.Time) { h.caughtUp.Store(t.UnixNano()) }

// ready says whether the archive keeps up, and why not.
func (h *archiveHealth) ready() (bool, string) {
	n := h.caughtUp.Load()
	if n == 0 {
		return false, "not caught up yet: the first segment is not archived"
	}
	lag := h.now().Sub(time.Unix(0, n))
	if lag > h.maxLag {
		return false, fmt.Sprintf("lagging: everything before %s is archived, %s ago (max lag %s)",
			time.Unix(0, n).UTC().Format(time.RFC3339), lag.Round(time.Second), h.maxLag)
	}
	return true, "archived up to " + strconv.FormatInt(int64(lag.Round(time.Second)/time.Second), 10) + "s ago"
}

func (h *archiveHealth) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.URL.Path != contract.ArchiverReadyPath {
		http.NotFound(w, r)
		return
	}
	ok, why := h.ready()
	if !ok {
		http.Error(w, why, http.StatusServiceUnavailable)
		return
	}
	fmt.Fprintln(w, why)
}

// serve answers on addr until ctx ends.
func (h *archiveHealth) serve(ctx context.Context, addr string, log *slog.Logger) error {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return fmt.Errorf("the archiver's health endpoint: %w", err)
	}
	srv := &http.Server{Handler: h, ReadHeaderTimeout: 5 * time.Second}
	go func() {
		<-ctx.Done()
		shut, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		_ = srv.Shutdown(shut)
	}()
	go func() {
		if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			log.Warn("the archiver's health endpoint stopped", "err", err)
		}
	}()
	return nil
}
