package cli

import "syscall"

// peakRSSKiB is the agent process's own peak resident set size (its child
// tools are not counted).
func peakRSSKiB() int64 {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return -1
	}
	return ru.Maxrss
}
