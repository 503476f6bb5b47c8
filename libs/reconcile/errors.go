package reconcile

import (
	"errors"
	"fmt"
	"time"
)

// StalledError ends a pass on a condition only a human can fix (an invalid
// spec, a child someone else controls, a permanent failure): Stalled=True,
// Ready=False with Reason and Message, and no retry until the object — or
// an object it watches — changes.
type StalledError struct {
	Reason, Message string
}

func (e *StalledError) Error() string { return e.Message }

// Stalled returns a StalledError.
func Stalled(reason, format string, args ...any) error {
	return &StalledError{Reason: reason, Message: fmt.Sprintf(format, args...)}
}

// WaitingError ends a pass that must wait for something outside the
// controller's hands (a referenced object, a first backup): Reconciling=True,
// Ready=False with Reason and Message, looked at again within After (events
// of watched objects wake it sooner). Not an error for the work queue.
type WaitingError struct {
	Reason, Message string
	After           time.Duration
}

func (e *WaitingError) Error() string { return e.Message }

// Waiting returns a WaitingError.
func Waiting(after time.Duration, reason, format string, args ...any) error {
	return &WaitingError{Reason: reason, Message: fmt.Sprintf(format, args...), After: after}
}

// TransientError ends a pass on an error that may go away by itself (the
// API server, a conflict): Reconciling=True, Ready=False with Reason
// (ReconcileError when empty) and the error's message; the work queue
// retries with exponential backoff. Any error that is not one of the typed
// errors is treated as transient.
type TransientError struct {
	Reason string
	Err    error
}

func (e *TransientError) Error() string { return e.Err.Error() }
func (e *TransientError) Unwrap() error { return e.Err }

// Transient wraps err as a TransientError with reason.
func Transient(reason string, err error) error {
	return &TransientError{Reason: reason, Err: err}
}

var errDone = errors.New("reconcile: done")

// Done ends the pass without error and without running the remaining steps
// (e.g. a one-off object that has finished). Status is still written.
func Done() error { return errDone }
