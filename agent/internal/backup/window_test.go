package backup

import (
	"errors"
	"fmt"
	"testing"

	"cairn.dev/agent/contract"
	"cairn.dev/agent/internal/pitr"
)

// TestWindowErrorCodes: a refused point-in-time restore carries the code
// the restore operator names in its condition.
func TestWindowErrorCodes(t *testing.T) {
	for _, tc := range []struct {
		err  error
		code string
	}{
		{fmt.Errorf("x: %w", pitr.ErrOutsideWindow), contract.CodeOutsideWindow},
		{fmt.Errorf("y: %w", pitr.ErrGap), contract.CodeArchiveGap},
		{errors.New("other"), ""},
	} {
		if got := contract.FailureCode(windowError(tc.err)); got != tc.code {
			t.Errorf("%v: code %q, want %q", tc.err, got, tc.code)
		}
	}
}
