package bench

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"k8s.io/client-go/rest"
	crmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"
)

// What the harness measures with: requests counted on their way to the API
// server, the control plane's metrics, CPU, heap and load.

// Counter is an http.RoundTripper that counts the requests it passes on:
// Event writes, other writes, and reads (gets and lists, an informer's
// initial list included; watches are not counted).
type Counter struct {
	next                           http.RoundTripper
	writes, events, reads, reviews atomic.Int64
}

// Wrap returns a copy of cfg whose requests c counts.
func (c *Counter) Wrap(cfg *rest.Config) *rest.Config {
	cfg = rest.CopyConfig(cfg)
	cfg.WrapTransport = func(rt http.RoundTripper) http.RoundTripper { c.next = rt; return c }
	return cfg
}

// RoundTrip implements http.RoundTripper.
func (c *Counter) RoundTrip(r *http.Request) (*http.Response, error) {
	switch {
	case r.Method == http.MethodPost && strings.HasSuffix(r.URL.Path, "/subjectaccessreviews"):
		// A question, answered and never stored: not a write.
		c.reviews.Add(1)
	case r.Method != http.MethodGet && strings.Contains(r.URL.Path, "/events"):
		c.events.Add(1)
	case r.Method != http.MethodGet:
		c.writes.Add(1)
	case r.URL.Query().Get("watch") == "":
		c.reads.Add(1)
	}
	return c.next.RoundTrip(r)
}

// Counts are a Counter's totals. Writes are the requests that store
// something (every method but GET, except Events and SubjectAccessReviews,
// counted apart: the webhooks' reviews of the requester, libs/access, go
// through the operator's client but store nothing).
type Counts struct{ Writes, Events, Reads, Reviews int64 }

// Load reads c's totals.
func (c *Counter) Load() Counts {
	return Counts{Writes: c.writes.Load(), Events: c.events.Load(), Reads: c.reads.Load(), Reviews: c.reviews.Load()}
}

// Sub is a - b.
func (a Counts) Sub(b Counts) Counts {
	return Counts{a.Writes - b.Writes, a.Events - b.Events, a.Reads - b.Reads, a.Reviews - b.Reviews}
}

// Parallel runs f(i) for every i in [0,n) on w workers and returns the
// first error (every i runs even after an error).
func Parallel(n, w int, f func(i int) error) error {
	var wg sync.WaitGroup
	var first atomic.Pointer[error]
	ch := make(chan int)
	for range max(w, 1) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range ch {
				if err := f(i); err != nil {
					first.CompareAndSwap(nil, &err)
				}
			}
		}()
	}
	for i := range n {
		ch <- i
	}
	close(ch)
	wg.Wait()
	if e := first.Load(); e != nil {
		return *e
	}
	return nil
}

// CounterSum sums the series of counter metric (in controller-runtime's
// registry) whose label has value.
func CounterSum(metric, label, value string) float64 {
	mfs, err := crmetrics.Registry.Gather()
	if err != nil {
		return 0
	}
	total := 0.0
	for _, mf := range mfs {
		if mf.GetName() != metric {
			continue
		}
		for _, m := range mf.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == label && l.GetValue() == value {
					total += m.GetCounter().GetValue()
				}
			}
		}
	}
	return total
}

// AdmissionLatency is the time this process' admission webhooks (the
// mutating and validating paths, not conversion) spent serving calls, in
// total, and how many calls they served: controller-runtime's
// controller_runtime_webhook_latency_seconds histograms, summed.
func AdmissionLatency() (time.Duration, uint64) {
	mfs, err := crmetrics.Registry.Gather()
	if err != nil {
		return 0, 0
	}
	var sum float64
	var n uint64
	for _, mf := range mfs {
		if mf.GetName() != "controller_runtime_webhook_latency_seconds" {
			continue
		}
		for _, m := range mf.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == "webhook" && (strings.HasPrefix(l.GetValue(), "/mutate") || strings.HasPrefix(l.GetValue(), "/validate")) {
					sum += m.GetHistogram().GetSampleSum()
					n += m.GetHistogram().GetSampleCount()
				}
			}
		}
	}
	return time.Duration(sum * float64(time.Second)), n
}

// Reconciles is the number of reconciles controller has run.
func Reconciles(controller string) float64 {
	return CounterSum("controller_runtime_reconcile_total", "controller", controller)
}

// Heap is the live Go heap after two GCs.
func Heap() uint64 {
	runtime.GC()
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return ms.HeapAlloc
}

// CPU is CPU seconds used by the control plane (this process' children:
// kube-apiserver and etcd) and by this process (operator, webhooks, clients).
type CPU struct{ Server, Self float64 }

// Sub is a - b.
func (a CPU) Sub(b CPU) CPU  { return CPU{a.Server - b.Server, a.Self - b.Self} }
func (a CPU) String() string { return fmt.Sprintf("%.1f / %.1f", a.Server, a.Self) }
func (a CPU) perObject(n int) string {
	return fmt.Sprintf("%.1f / %.1f", a.Server*1000/float64(n), a.Self*1000/float64(n))
}

// ReadCPU reads the CPU time of this process and of its live children.
func ReadCPU() CPU {
	var t CPU
	var ru syscall.Rusage
	if syscall.Getrusage(syscall.RUSAGE_SELF, &ru) == nil {
		t.Self = time.Duration(ru.Utime.Nano() + ru.Stime.Nano()).Seconds()
	}
	me := os.Getpid()
	stats, _ := filepath.Glob("/proc/[0-9]*/stat")
	for _, p := range stats {
		raw, err := os.ReadFile(p)
		if err != nil {
			continue
		}
		// Fields after the command (which may hold spaces) in parentheses.
		i := strings.LastIndexByte(string(raw), ')')
		if i < 0 {
			continue
		}
		f := strings.Fields(string(raw[i+1:]))
		if len(f) < 13 {
			continue
		}
		var ppid int
		var utime, stime float64
		fmt.Sscan(f[1], &ppid)
		if ppid != me {
			continue
		}
		fmt.Sscan(f[11], &utime)
		fmt.Sscan(f[12], &stime)
		t.Server += (utime + stime) / 100 // clock ticks (USER_HZ)
	}
	return t
}

// Settle waits until c's writes and Events have not moved for quiet (at
// most until ctx ends).
func Settle(ctx context.Context, c *Counter, quiet time.Duration) {
	last := c.writes.Load() + c.events.Load()
	stable := time.Now()
	for time.Since(stable) < quiet && ctx.Err() == nil {
		time.Sleep(quiet / 10)
		if cur := c.writes.Load() + c.events.Load(); cur != last {
			last, stable = cur, time.Now()
		}
	}
}

// LoadAverage is the 1, 5 and 15 minute load average ("" when unknown).
func LoadAverage() string {
	raw, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return ""
	}
	f := strings.Fields(string(raw))
	if len(f) < 3 {
		return ""
	}
	return strings.Join(f[:3], " ")
}
