// Package bench is the harness of the operator benchmarks (`make bench`):
// one operator on a real kube-apiserver + etcd (libs/testenv), in-process
// with its webhooks, restricted to the bench namespace. For N objects of the
// operator's kind it measures:
//
//   - converge: from the first create until the operator has done, for
//     every object, what it can do on a bare API server (its children
//     created, status written for the object's generation);
//   - floor: the same API writes made by a bare client in the same run
//     (the kind's Floor: create the object through admission, create the
//     children the operator renders, write the status and the Events the
//     operator writes), with the same parallelism, measured before and
//     after the operator (A-B-A: drift weighs on both sides); ratio =
//     converge / the mean of the two floors;
//   - the operator's own API writes, Events, reads and reconciles per object
//     at creation, and during a forced resync (every object touched once:
//     an operator at rest writes nothing);
//   - Go heap per managed object after GC, and the CPU seconds of the
//     control plane (the process' children: kube-apiserver, etcd) and of
//     the bench process (operator, webhooks, clients) in each phase.
//
// An operator's bench is a main package inside its own module (it needs the
// operator's internal packages) whose main calls Main with a Kind.
package bench

import (
	"context"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"runtime"
	"runtime/pprof"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/util/retry"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	crmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"

	"cairn.dev/libs/access"
	"cairn.dev/libs/manager"
	"cairn.dev/libs/testenv"
)

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

// Kind is what one operator's bench supplies.
type Kind struct {
	// Title heads the output, e.g. "backup operator".
	Title string
	// Object is the kind's name, e.g. "BackupJob".
	Object string
	// Controller is the controller's name in the reconcile metrics.
	Controller string
	// Bases are the deploy bases (deploy/<base>) whose CRDs the control
	// plane installs; the first one's webhook configurations are served by
	// the operator. The scheme is the operator's.
	Bases []string
	// Env is what the control plane installs when Bases is empty (CRDs,
	// webhooks, scheme).
	Env testenv.Options
	// Operator is the operator as its main wires it (operator.New, given
	// the version "bench"); Args are its flags (e.g. --agent-image). The
	// harness adds --watch-namespaces and --max-concurrent-reconciles.
	Operator func(version string) manager.Operator
	Args     []string
	// Prepare creates, untimed, what the objects of namespace ns refer to
	// (Secrets, source objects), for n objects.
	Prepare func(ctx context.Context, c client.Client, ns string, n int) error
	// New returns object i of namespace ns, as a user creates it.
	New func(ns string, i int) client.Object
	// Floor makes, with the bare client c, the API writes the operator
	// makes for obj (created already, through admission): its children,
	// its status writes, its Events (see Event).
	Floor func(ctx context.Context, c client.Client, obj client.Object) error
	// Converged reports whether the operator is done with all n objects of
	// ns (reads through c, from the watch cache: see FromCache).
	Converged func(ctx context.Context, c client.Client, ns string, n int) (bool, error)
	// Conversions counts the conversion webhook's calls; nil when the kind
	// has one version (the column shows "—").
	Conversions func() float64
}

// envOptions is what the control plane installs: Env, or the CRDs of
// Bases, the webhooks of the first, and the operator's scheme.
func (k Kind) envOptions() (testenv.Options, error) {
	if len(k.Bases) == 0 {
		return k.Env, nil
	}
	root, err := testenv.RepoRoot()
	if err != nil {
		return testenv.Options{}, err
	}
	scheme, err := k.Operator("bench").Scheme()
	if err != nil {
		return testenv.Options{}, err
	}
	o := testenv.Options{Scheme: scheme, WebhookManifestDirs: []string{filepath.Join(root, "deploy", k.Bases[0], "webhook", "generated")}}
	for _, b := range k.Bases {
		o.CRDDirectoryPaths = append(o.CRDDirectoryPaths, filepath.Join(root, "deploy", b, "crd", "bases"))
	}
	return o, nil
}

// FromCache lists namespace ns from the API server's watch cache
// (resourceVersion 0): a consistent list may fall back to etcd, which, for a
// kind with a conversion webhook, converts every object (one webhook call
// each).
func FromCache(ns string) *client.ListOptions {
	return &client.ListOptions{Namespace: ns, Raw: &metav1.ListOptions{ResourceVersion: "0"}}
}

// AllDone is the usual Converged: the n objects of ns (listed into a copy
// of list) all pass done, and ns holds n children (listed into a copy of
// children). Both lists come from the API server's watch cache (FromCache).
func AllDone(list, children client.ObjectList, done func(client.Object) bool) func(context.Context, client.Client, string, int) (bool, error) {
	return func(ctx context.Context, c client.Client, ns string, n int) (bool, error) {
		l := list.DeepCopyObject().(client.ObjectList)
		if err := c.List(ctx, l, FromCache(ns)); err != nil {
			return false, err
		}
		if meta.LenList(l) != n {
			return false, nil
		}
		items, err := meta.ExtractList(l)
		if err != nil {
			return false, err
		}
		for _, o := range items {
			if obj, ok := o.(client.Object); !ok || !done(obj) {
				return false, nil
			}
		}
		ch := children.DeepCopyObject().(client.ObjectList)
		if err := c.List(ctx, ch, FromCache(ns)); err != nil {
			return false, err
		}
		return meta.LenList(ch) == n, nil
	}
}

// Event creates, with c, an events.k8s.io Event about obj as an operator's
// recorder writes it (the floor's Events).
func Event(ctx context.Context, c client.Client, obj client.Object, apiVersion, kind, typ, reason, action, note string) error {
	return c.Create(ctx, &eventsv1.Event{
		ObjectMeta: metav1.ObjectMeta{Namespace: obj.GetNamespace(), GenerateName: obj.GetName() + "-floor-"},
		EventTime:  metav1.NowMicro(), ReportingController: "cairn.dev/bench-floor", ReportingInstance: "bench",
		Action: action, Reason: reason, Type: typ, Note: note,
		Regarding: corev1.ObjectReference{APIVersion: apiVersion, Kind: kind, Namespace: obj.GetNamespace(), Name: obj.GetName(), UID: obj.GetUID()},
	})
}

// Options of one run.
type Options struct {
	// Sizes are the numbers of objects, one row each.
	Sizes []int
	// Workers: the operator's workers and the clients' parallelism.
	Workers int
	// CPUProfile, MemProfile, APIProfile: profile files (last size wins);
	// see the flags in Main.
	CPUProfile, MemProfile, APIProfile string
	// Timeout bounds one size's convergence.
	Timeout time.Duration
	// Out receives the table.
	Out io.Writer
}

// Row is one size's figures.
type Row struct {
	N        int
	Converge time.Duration
	// Floor is the mean of FloorBefore and FloorAfter, the floor measured
	// before and after the operator.
	Floor, FloorBefore, FloorAfter time.Duration
	Create, Resync                 Counts
	FloorCounts                    Counts
	Reconciles                     float64
	ResyncReconciles               float64
	Conversions                    float64
	HeapBytes                      int64
	CPUFloor, CPUConv              CPU
	ConversionsCounted             bool
	// Reviews is how many SubjectAccessReviews the webhooks sent for the
	// floor's n creates (before the operator): the requester checks of
	// libs/access, each a round trip to the API server inside the create.
	Reviews int64
	// Admission is the time the webhooks spent serving the floor's n
	// creates (mutating + validating, measured by the webhook server), and
	// ReviewTime the part of it spent waiting for SubjectAccessReviews.
	Admission, ReviewTime time.Duration
}

// Ratio is converge / floor.
func (r Row) Ratio() float64 { return r.Converge.Seconds() / r.Floor.Seconds() }

// PerObject is v / N.
func (r Row) PerObject(v float64) float64 { return v / float64(r.N) }

// Header is the table's header (two lines).
const Header = "| N | converge s | floor s | ratio | writes/obj create | events/obj create | reconciles/obj create | reads/obj create | conversions/obj create | writes/obj resync | reconciles/obj resync | heap KiB/obj | CPU ms/obj floor (server / bench) | CPU ms/obj converge (server / bench) |\n" +
	"|---|---|---|---|---|---|---|---|---|---|---|---|---|---|\n"

// String is the row of the table.
func (r Row) String() string {
	conv := "—"
	if r.ConversionsCounted {
		conv = fmt.Sprintf("%.2f", r.PerObject(r.Conversions))
	}
	return fmt.Sprintf("| %d | %.2f | %.2f | %.2f | %.2f | %.2f | %.2f | %.2f | %s | %.2f | %.2f | %.1f | %s | %s |\n",
		r.N, r.Converge.Seconds(), r.Floor.Seconds(), r.Ratio(),
		r.PerObject(float64(r.Create.Writes)), r.PerObject(float64(r.Create.Events)), r.PerObject(r.Reconciles),
		r.PerObject(float64(r.Create.Reads)), conv,
		r.PerObject(float64(r.Resync.Writes)), r.PerObject(r.ResyncReconciles),
		float64(r.HeapBytes)/1024/float64(r.N), r.CPUFloor.perObject(r.N), r.CPUConv.perObject(r.N))
}

// Main runs k's bench as a command: flags, control plane, one row per size,
// then the CPU notes. It exits 1 on any failure, with the control plane
// stopped.
func Main(k Kind) {
	sizes := flag.String("n", "100,1000", "comma-separated numbers of "+k.Object+"s")
	o := Options{Out: os.Stdout, Timeout: 30 * time.Minute}
	flag.IntVar(&o.Workers, "workers", 4, "operator --max-concurrent-reconciles, and client parallelism")
	flag.StringVar(&o.CPUProfile, "cpuprofile", "", "write a CPU profile of the operator's convergence (last size) to this file")
	flag.StringVar(&o.APIProfile, "apiprofile", "", "write the API server's CPU profile of the first 10 s of convergence (last size) to this file, and of the floor to its .floor.pprof sibling")
	flag.StringVar(&o.MemProfile, "memprofile", "", "write a heap profile after convergence (last size) to this file")
	flag.Parse()
	for _, s := range strings.Split(*sizes, ",") {
		var n int
		if _, err := fmt.Sscan(s, &n); err != nil || n <= 0 {
			fmt.Fprintf(os.Stderr, "bench: -n: %q is not a positive number\n", s)
			os.Exit(2)
		}
		o.Sizes = append(o.Sizes, n)
	}
	if o.MemProfile != "" {
		// Sample finely enough to attribute per-object memory (slows
		// allocation: take the times from a run without -memprofile).
		runtime.MemProfileRate = 4096
	}
	testenv.SetupLogging()
	opts, err := k.envOptions()
	if err != nil {
		fmt.Fprintf(os.Stderr, "bench: %v\n", err)
		os.Exit(1)
	}
	env, err := testenv.Start(opts)
	if err != nil {
		fmt.Fprintf(os.Stderr, "bench: %v\n", err)
		os.Exit(1)
	}
	_, err = Run(context.Background(), env, k, o)
	if serr := env.Stop(); err == nil && serr != nil {
		err = serr
	}
	if err != nil {
		fmt.Fprintf(os.Stderr, "bench: %v\n", err)
		os.Exit(1)
	}
}

// Run measures k on env at every size of o, printing the table to o.Out as
// it goes, and returns the rows.
func Run(ctx context.Context, env *testenv.Env, k Kind, o Options) ([]Row, error) {
	if o.Workers <= 0 {
		o.Workers = 4
	}
	if o.Timeout <= 0 {
		o.Timeout = 30 * time.Minute
	}
	if o.Out == nil {
		o.Out = io.Discard
	}
	fmt.Fprintf(o.Out, "# %s benchmark, %s, %d CPUs, GOMAXPROCS %d, %d workers\n", k.Title, time.Now().UTC().Format("2006-01-02"), runtime.NumCPU(), runtime.GOMAXPROCS(0), o.Workers)
	fmt.Fprint(o.Out, Header)
	var rows []Row
	var notes []string
	for _, n := range o.Sizes {
		r, err := runOne(ctx, env, k, o, n)
		if err != nil {
			return rows, fmt.Errorf("N=%d: %w", n, err)
		}
		rows = append(rows, r)
		fmt.Fprint(o.Out, r.String())
		notes = append(notes, fmt.Sprintf("N=%d floor s before / after the operator: %.2f / %.2f; CPU s (API server + etcd / bench process): floor %s (mean), converge %s; "+
			"SubjectAccessReviews per create (webhooks, libs/access): %.2f; admission webhooks' time per create (mutate + validate, server side, floor before): %.2f ms, of which SubjectAccessReviews %.2f ms",
			n, r.FloorBefore.Seconds(), r.FloorAfter.Seconds(), r.CPUFloor, r.CPUConv, r.PerObject(float64(r.Reviews)),
			r.PerObject(float64(r.Admission.Microseconds()))/1000, r.PerObject(float64(r.ReviewTime.Microseconds()))/1000))
		if f, c := r.FloorCounts, r.Create; f.Writes != c.Writes || f.Events != c.Events {
			// Not like-for-like: say so where the table does not go.
			fmt.Fprintf(os.Stderr, "bench: N=%d: the floor wrote %.2f objects and %.2f Events per %s, the operator %.2f and %.2f\n",
				n, r.PerObject(float64(f.Writes)), r.PerObject(float64(f.Events)), k.Object, r.PerObject(float64(c.Writes)), r.PerObject(float64(c.Events)))
		}
	}
	fmt.Fprintln(o.Out)
	for _, l := range notes {
		fmt.Fprintln(o.Out, l)
	}
	return rows, nil
}

// profileAPIServer writes, in the background, the API server's CPU profile
// of the next 10 seconds to file (nothing when file is "").
func profileAPIServer(ctx context.Context, env *testenv.Env, file string) {
	if file == "" {
		return
	}
	c := rest.CopyConfig(env.Config)
	c.GroupVersion = &corev1.SchemeGroupVersion
	c.NegotiatedSerializer = clientgoscheme.Codecs.WithoutConversion()
	go func() {
		rc, err := rest.RESTClientFor(c)
		if err != nil {
			fmt.Fprintf(os.Stderr, "bench: API server profile: %v\n", err)
			return
		}
		raw, err := rc.Get().AbsPath("/debug/pprof/profile").Param("seconds", "10").Timeout(time.Minute).DoRaw(ctx)
		if err == nil {
			err = os.WriteFile(file, raw, 0o644)
		}
		if err != nil {
			fmt.Fprintf(os.Stderr, "bench: API server profile: %v\n", err)
		}
	}()
}

// runOne measures one size in three phases, each in a namespace of its own:
// the floor (webhooks served, no controller), the operator, and the floor
// again. The floor is measured before and after the operator (A-B-A) so that
// what drifts during a run — the objects the earlier phases left in etcd and
// in the API server's caches, the machine itself — weighs on both sides of
// the ratio: converge / the mean of the two floors.
func runOne(ctx context.Context, env *testenv.Env, k Kind, o Options, n int) (row Row, err error) {
	row.N = n
	c := env.Client
	floorNS, benchNS, afterNS := fmt.Sprintf("floor-%d", n), fmt.Sprintf("bench-%d", n), fmt.Sprintf("floor-after-%d", n)
	for _, ns := range []string{floorNS, benchNS, afterNS} {
		if err := c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}); err != nil {
			return row, err
		}
		if k.Prepare != nil {
			if err := k.Prepare(ctx, c, ns, n); err != nil {
				return row, fmt.Errorf("preparing namespace %s: %w", ns, err)
			}
		}
	}

	before, err := measureFloor(ctx, env, k, o, floorNS, n, profileSibling(o.APIProfile, ".floor.pprof"))
	if err != nil {
		return row, fmt.Errorf("floor: %w", err)
	}
	row.FloorBefore, row.FloorCounts, row.Reviews = before.time, before.counts, before.reviews
	row.Admission, row.ReviewTime = before.admission, before.reviewTime

	if err := measureOperator(ctx, env, k, o, benchNS, n, &row); err != nil {
		return row, err
	}

	after, err := measureFloor(ctx, env, k, o, afterNS, n, "")
	if err != nil {
		return row, fmt.Errorf("floor after the operator: %w", err)
	}
	row.FloorAfter = after.time
	row.Floor = (before.time + after.time) / 2
	row.CPUFloor = CPU{(before.cpu.Server + after.cpu.Server) / 2, (before.cpu.Self + after.cpu.Self) / 2}
	return row, nil
}

// floorRun is one measurement of the floor.
type floorRun struct {
	time                  time.Duration
	cpu                   CPU
	counts                Counts
	reviews               int64
	admission, reviewTime time.Duration
}

// measureFloor makes the floor's writes for n objects of ns with a bare
// client, admission served by the operator's webhooks (no controller runs).
func measureFloor(ctx context.Context, env *testenv.Env, k Kind, o Options, ns string, n int, apiProfile string) (r floorRun, err error) {
	hooks := k.Operator("bench")
	hooks.Setup = func(context.Context, ctrl.Manager, *manager.Options) error { return nil }
	wh, err := env.StartOperator(ctx, hooks, testenv.OperatorOptions{Args: k.Args})
	if err != nil {
		return r, err
	}
	defer func() {
		if serr := wh.Stop(); err == nil && serr != nil {
			err = serr
		}
	}()
	count := &Counter{}
	fc, err := client.New(count.Wrap(env.Config), client.Options{Scheme: env.Scheme})
	if err != nil {
		return r, err
	}
	profileAPIServer(ctx, env, apiProfile)
	var reviews0 int64
	var reviewTime0 time.Duration
	guard := access.For(wh.Manager)
	if guard != nil {
		reviews0, reviewTime0 = guard.Reviewer.Reviews(), guard.Reviewer.ReviewTime()
	}
	adm0, _ := AdmissionLatency()
	cpu0, c0 := ReadCPU(), count.Load()
	t0 := time.Now()
	err = Parallel(n, o.Workers, func(i int) error {
		obj := k.New(ns, i)
		if err := fc.Create(ctx, obj); err != nil {
			return err
		}
		return k.Floor(ctx, fc, obj)
	})
	r.time = time.Since(t0)
	r.cpu = ReadCPU().Sub(cpu0)
	if guard != nil {
		r.reviews = guard.Reviewer.Reviews() - reviews0
		r.reviewTime = guard.Reviewer.ReviewTime() - reviewTime0
	}
	adm1, _ := AdmissionLatency()
	r.admission = adm1 - adm0
	// The floor's creates are writes too; the operator's counts do not
	// include the user's create.
	r.counts = count.Load().Sub(c0)
	r.counts.Writes -= int64(n)
	return r, err
}

// measureOperator runs the operator, restricted to ns, for n new objects:
// convergence, its requests and reconciles at creation and in a forced
// resync, heap, CPU.
func measureOperator(ctx context.Context, env *testenv.Env, k Kind, o Options, ns string, n int, row *Row) (err error) {
	c := env.Client
	opCount := &Counter{}
	args := append([]string{"--watch-namespaces=" + ns, fmt.Sprintf("--max-concurrent-reconciles=%d", o.Workers)}, k.Args...)
	h0 := Heap()
	op, err := env.StartOperator(ctx, k.Operator("bench"), testenv.OperatorOptions{Config: opCount.Wrap(env.Config), Args: args})
	if err != nil {
		return err
	}
	defer func() {
		if serr := op.Stop(); err == nil && serr != nil {
			err = serr
		}
	}()
	conversions := func() float64 {
		if k.Conversions == nil {
			return 0
		}
		return k.Conversions()
	}
	row.ConversionsCounted = k.Conversions != nil
	w0, r0, c0 := opCount.Load(), Reconciles(k.Controller), conversions()

	if o.CPUProfile != "" {
		f, err := os.Create(o.CPUProfile)
		if err != nil {
			return err
		}
		defer f.Close()
		if err := pprof.StartCPUProfile(f); err != nil {
			return err
		}
	}
	profileAPIServer(ctx, env, o.APIProfile)
	cpu1 := ReadCPU()
	t1 := time.Now()
	if err := Parallel(n, o.Workers, func(i int) error { return c.Create(ctx, k.New(ns, i)) }); err != nil {
		return fmt.Errorf("creating the %ss: %w", k.Object, err)
	}
	if err := awaitConvergence(ctx, k, c, ns, n, r0, t1, o.Timeout); err != nil {
		return err
	}
	row.Converge = time.Since(t1)
	row.CPUConv = ReadCPU().Sub(cpu1)
	if o.CPUProfile != "" {
		pprof.StopCPUProfile()
	}
	Settle(ctx, opCount, time.Second)
	w1, r1, c1 := opCount.Load(), Reconciles(k.Controller), conversions()
	row.Create, row.Reconciles, row.Conversions = w1.Sub(w0), r1-r0, c1-c0
	row.HeapBytes = int64(Heap()) - int64(h0)
	if o.MemProfile != "" {
		f, err := os.Create(o.MemProfile)
		if err != nil {
			return err
		}
		err = pprof.Lookup("heap").WriteTo(f, 0)
		if cerr := f.Close(); err == nil {
			err = cerr
		}
		if err != nil {
			return err
		}
	}

	// Forced resync: touch every object (a label no controller reads, but
	// which passes the predicates), so each is reconciled once.
	if err := Parallel(n, o.Workers, func(i int) error {
		return retry.RetryOnConflict(retry.DefaultRetry, func() error {
			obj := k.New(ns, i)
			if err := c.Get(ctx, client.ObjectKeyFromObject(obj), obj); err != nil {
				return err
			}
			l := obj.GetLabels()
			if l == nil {
				l = map[string]string{}
			}
			l["resync"] = "1"
			obj.SetLabels(l)
			return c.Update(ctx, obj)
		})
	}); err != nil {
		return fmt.Errorf("resync: %w", err)
	}
	deadline := time.Now().Add(5*time.Minute + time.Duration(n)*20*time.Millisecond)
	for Reconciles(k.Controller)-r1 < float64(n) && time.Now().Before(deadline) {
		time.Sleep(50 * time.Millisecond)
	}
	Settle(ctx, opCount, time.Second)
	row.Resync, row.ResyncReconciles = opCount.Load().Sub(w1), Reconciles(k.Controller)-r1
	return nil
}

// awaitConvergence polls k.Converged until it holds (or timeout after t1).
// The operator reconciles every object at least once before it can have
// converged, so the poll waits for that in-process count first (free): the
// poll's list of N objects — a second of API server and bench CPU at
// N=10,000, work the floor does not do — runs only once the operator may be
// done. After that its interval is at least 4× the last poll's duration, so
// it takes at most a fifth of one core (50 ms minimum, for small N).
func awaitConvergence(ctx context.Context, k Kind, c client.Client, ns string, n int, r0 float64, t1 time.Time, timeout time.Duration) error {
	for Reconciles(k.Controller)-r0 < float64(n) {
		if time.Since(t1) > timeout {
			return fmt.Errorf("not converged after %s: %.0f of %d %ss reconciled", timeout, Reconciles(k.Controller)-r0, n, k.Object)
		}
		time.Sleep(10 * time.Millisecond)
	}
	for {
		p0 := time.Now()
		done, err := k.Converged(ctx, c, ns, n)
		if err != nil {
			return fmt.Errorf("polling: %w", err)
		}
		if done {
			return nil
		}
		if time.Since(t1) > timeout {
			return fmt.Errorf("not converged after %s", timeout)
		}
		time.Sleep(max(50*time.Millisecond, 4*time.Since(p0)))
	}
}

// profileSibling is file with its .pprof suffix replaced by suffix ("" for "").
func profileSibling(file, suffix string) string {
	if file == "" {
		return ""
	}
	return strings.TrimSuffix(file, ".pprof") + suffix
}
