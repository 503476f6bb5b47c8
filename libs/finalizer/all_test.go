package finalizer

import (
	"context"
	"errors"
	"testing"
)

// TestAll: every step runs on every call, done only when all are, and an
// error ends the call at once.
func TestAll(t *testing.T) {
	var calls []string
	step := func(name string, done bool, err error) func(context.Context) (bool, error) {
		return func(context.Context) (bool, error) { calls = append(calls, name); return done, err }
	}
	ctx := context.Background()
	if done, err := All(step("a", false, nil), step("b", true, nil))(ctx); done || err != nil || len(calls) != 2 {
		t.Fatalf("a not done: done=%v err=%v calls=%v, want false, nil, both run", done, err, calls)
	}
	calls = nil
	if done, err := All(step("a", true, nil), step("b", true, nil))(ctx); !done || err != nil {
		t.Fatalf("both done: %v %v", done, err)
	}
	calls = nil
	boom := errors.New("boom")
	if done, err := All(step("a", true, boom), step("b", true, nil))(ctx); done || !errors.Is(err, boom) || len(calls) != 1 {
		t.Fatalf("error: done=%v err=%v calls=%v, want false, boom, b not run", done, err, calls)
	}
}
