package harden

import "syscall"

// prSetDumpable is PR_SET_DUMPABLE of prctl(2).
const prSetDumpable = 4

// Seal makes the process not dumpable (see the package documentation).
func Seal() error {
	if _, _, errno := syscall.RawSyscall(syscall.SYS_PRCTL, prSetDumpable, 0, 0); errno != 0 {
		return errno
	}
	return nil
}
