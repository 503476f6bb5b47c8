package soak

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"

	"cairn.dev/e2e/install"
)

// sampleRSS reads the resident set of every running operator container
// (VmRSS of its main process, from the host's /proc), all stamped with one
// time.
func sampleRSS(ctx context.Context, env *install.Env, operators []string) ([]RSSSample, error) {
	at := time.Now()
	var out []RSSSample
	for _, op := range operators {
		pods, err := install.OperatorPods(ctx, env.Client, op)
		if err != nil {
			return nil, err
		}
		leader, _ := install.LeaderPod(ctx, env.Client, op)
		for _, p := range pods {
			pid, err := env.Cluster.Pods.PID(ctx, install.Namespace, p.Name, "manager")
			if err != nil {
				continue // ended since the list
			}
			b, err := vmRSS(pid)
			if err != nil {
				continue
			}
			out = append(out, RSSSample{At: at, Operator: op, Pod: p.Name, Leader: p.Name == leader, Bytes: b})
		}
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("soak: no operator container to read the memory of")
	}
	return out, nil
}

// vmRSS reads VmRSS of a process, in bytes.
func vmRSS(pid int) (int64, error) {
	f, err := os.Open(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0, err
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), "VmRSS:"); ok {
			kb, err := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
			return kb << 10, err
		}
	}
	return 0, fmt.Errorf("no VmRSS in /proc/%d/status", pid)
}

// loadAverage is the first field of /proc/loadavg's three ("1.23 0.98 0.70").
func loadAverage() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "?"
	}
	f := strings.Fields(string(b))
	if len(f) < 3 {
		return "?"
	}
	return strings.Join(f[:3], " ")
}
