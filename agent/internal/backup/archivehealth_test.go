package backup

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"cairn.dev/agent/contract"
)

// TestArchiveHealth: the archiver is ready only once caught up, and while
// the last caught-up time is within its max lag; the endpoint answers 503
// with the reason otherwise.
func TestArchiveHealth(t *testing.T) {
	now := time.Date(2026, 12, 5, 10, 0, 0, 0, time.UTC)
	h := &archiveHealth{maxLag: 5 * time.Minute, now: func() time.Time { return now }}
	get := func() (int, string) {
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, contract.ArchiverReadyPath, nil))
		return rec.Code, rec.Body.String()
	}
	if code, body := get(); code != http.StatusServiceUnavailable || !strings.Contains(body, "not caught up yet") {
		t.Errorf("before the first segment: %d %q, want 503 not caught up", code, body)
	}
	h.set(now.Add(-time.Minute))
	if code, body := get(); code != http.StatusOK {
		t.Errorf("caught up a minute ago: %d %q, want 200", code, body)
	}
	now = now.Add(5 * time.Minute)
	if code, body := get(); code != http.StatusServiceUnavailable || !strings.Contains(body, "lagging") || !strings.Contains(body, "6m0s ago") {
		t.Errorf("caught up 6 minutes ago, max lag 5m: %d %q, want 503 lagging", code, body)
	}
	h.set(now)
	if code, _ := get(); code != http.StatusOK {
		t.Errorf("caught up again: %d, want 200", code)
	}
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/other", nil))
	if rec.Code != http.StatusNotFound {
		t.Errorf("another path: %d, want 404", rec.Code)
	}
}
