package main

import (
	"bufio"
	"fmt"
	"os"
	"os/exec"
	"runtime"
	"strconv"
	"strings"
	"time"
)

func verdict(ok bool) string {
	if ok {
		return "met"
	}
	return "NOT met"
}

func mbps(b int64, d time.Duration) float64 { return float64(b) / 1e6 / d.Seconds() }

func rss(kib int64) string {
	if kib <= 0 {
		return "—"
	}
	return fmt.Sprintf("%.1f", float64(kib)/1024)
}

func loadAvg() string {
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

func toolVersion(tool, arg string) string {
	out, err := exec.Command(tool, arg).Output()
	if err != nil {
		return tool + " ?"
	}
	return strings.TrimSpace(strings.SplitN(string(out), "\n", 2)[0])
}

func cpuModel() string {
	f, err := os.Open("/proc/cpuinfo")
	if err != nil {
		return runtime.GOARCH
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if k, v, ok := strings.Cut(sc.Text(), ":"); ok && strings.TrimSpace(k) == "model name" {
			return strings.TrimSpace(v)
		}
	}
	return runtime.GOARCH
}

func memTotal() string {
	b, err := os.ReadFile("/proc/meminfo")
	if err != nil {
		return "? memory"
	}
	for _, l := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(l, "MemTotal:"); ok {
			kb, _ := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
			return fmt.Sprintf("%.0f GiB RAM", float64(kb)/(1<<20))
		}
	}
	return "? memory"
}

// printTargets prints a line per agent configuration with a peer: each
// ratio against its target (the case's own, or the defaults) and its peak
// RSS against its limit.
func printTargets(rows []row) {
	for _, r := range rows {
		by := map[string]measurement{}
		for _, m := range r.ms {
			by[m.config] = m
		}
		for _, m := range r.ms {
			if !strings.HasPrefix(m.config, "agent") {
				continue
			}
			p, ok := by[m.peer]
			if !ok {
				continue
			}
			ratio := p.elapsed.Seconds() / m.elapsed.Seconds()
			want := m.want
			switch {
			case want > 0:
			case strings.Contains(m.peer, "restic"):
				want = 1.2
			case strings.HasPrefix(m.config, "agent restore"):
				want = 0.95
			default:
				want = 1.0
			}
			line := fmt.Sprintf("  %s %.0f MB, %s: %.2f× %s (≥ %.2g×: %s)", r.engine, float64(r.dbBytes)/1e6, m.config, ratio, m.peer, want, verdict(ratio >= want))
			if ps, ok := by[m.peer+" + sync"]; ok {
				line += fmt.Sprintf(", %.2f× %s (durable, like the agent's PVC store)", ps.elapsed.Seconds()/m.elapsed.Seconds(), ps.config)
			}
			for _, t := range m.also {
				if q, ok := by[t.peer]; ok {
					ratio := q.elapsed.Seconds() / m.elapsed.Seconds()
					line += fmt.Sprintf(", %.2f× %s (≥ %.2g×: %s)", ratio, t.peer, t.want, verdict(ratio >= t.want))
				}
			}
			if strings.Contains(m.peer, "restic") {
				line += fmt.Sprintf(", stored %.1f vs %.1f MB (%s)", float64(m.outBytes)/1e6, float64(p.outBytes)/1e6, verdict(m.outBytes <= p.outBytes))
			}
			limit := m.rssMiB
			if limit == 0 {
				limit = 64
			}
			line += fmt.Sprintf(", peak RSS %s MiB (≤ %d: %s)", rss(m.rssKiB), limit, verdict(m.rssKiB > 0 && m.rssKiB <= limit<<10))
			fmt.Println(line)
		}
	}
}

// machineCPU is the CPU time every process on the machine has used since
// boot: /proc/stat's first line, all but idle and iowait (guest time is
// already in user).
func machineCPU() time.Duration {
	b, err := os.ReadFile("/proc/stat")
	if err != nil {
		return 0
	}
	line, _, _ := strings.Cut(string(b), "\n")
	f := strings.Fields(line)
	if len(f) < 9 || f[0] != "cpu" {
		return 0
	}
	var ticks int64
	for i, v := range f[1:9] {
		if i == 3 || i == 4 { // idle, iowait
			continue
		}
		n, _ := strconv.ParseInt(v, 10, 64)
		ticks += n
	}
	return time.Duration(ticks) * time.Second / clockTicks
}

// clockTicks is USER_HZ, /proc/stat's unit: 100 on every Linux build the
// bench runs on (sysconf(_SC_CLK_TCK)).
const clockTicks = 100

// busyPct prints m's machine CPU and its share of the cores over its time.
func busyPct(m measurement) string {
	if m.busy <= 0 || m.elapsed <= 0 {
		return "—"
	}
	return fmt.Sprintf("%.1f (%.0f %%)", m.busy.Seconds(), 100*m.busy.Seconds()/(m.elapsed.Seconds()*float64(runtime.NumCPU())))
}
