package cli

import (
	"bufio"
	"os"
	"strconv"
	"strings"
)

// peakRSSKiB is the agent process's own peak resident set size (VmHWM; its
// child tools are not counted). getrusage's ru_maxrss is not used: Linux
// carries it across execve, so it would report the parent's size at fork.
func peakRSSKiB() int64 {
	f, err := os.Open("/proc/self/status")
	if err != nil {
		return -1
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), "VmHWM:"); ok {
			n, err := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
			if err != nil {
				return -1
			}
			return n
		}
	}
	return -1
}
