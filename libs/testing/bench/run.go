package bench

import (
	"context"
	"fmt"
	"io"
	"os"
	"runtime"
	"runtime/pprof"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/util/retry"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"cairn.dev/libs/access"
	"cairn.dev/libs/manager"
	"cairn.dev/libs/testing/testenv"
)

// Run measures k on env at every size of o, printing the table to o.Out as
// it goes, and returns the rows.
func Run(ctx context.Context, env *testenv.Env, k Kind, o Options) ([]Row, error) {
	k, err := k.complete()
	if err != nil {
		return nil, err
	}
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
