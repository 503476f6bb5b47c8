package cluster

import (
	"errors"
	"os"
	"syscall"
	"testing"
)

// lockCreate holds a lock another process cannot take until it is
// released (flock on a second open file, as another process's would be).
func TestLockCreateExcludesOthersUntilReleased(t *testing.T) {
	createLock = t.TempDir() + "/create.lock"
	unlock, err := lockCreate()
	if err != nil {
		t.Fatal(err)
	}
	other, err := os.Open(createLock)
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()
	try := func() error { return syscall.Flock(int(other.Fd()), syscall.LOCK_EX|syscall.LOCK_NB) }
	if err := try(); !errors.Is(err, syscall.EWOULDBLOCK) {
		t.Fatalf("while held: flock = %v, want EWOULDBLOCK", err)
	}
	unlock()
	if err := try(); err != nil {
		t.Fatalf("after release: flock = %v, want it taken", err)
	}
}
