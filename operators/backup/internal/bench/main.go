// Command bench measures the backup operator against a real kube-apiserver +
// etcd (libs/testenv), with the operator in-process (webhooks on): for N
// BackupJobs it prints the time to converge (CronJob exists and status Ready
// for all), the raw floor (the same API writes made by a bare client in the
// same run) and their ratio; API writes, Events and reconciles per object at
// creation and during a forced resync; and Go heap per managed object. It is a
// measurement, not a test: run it with `make bench` (N=100 and 1000).
package main

import (
	"context"
	"flag"
	"fmt"
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

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	k8sruntime "k8s.io/apimachinery/pkg/runtime"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/util/retry"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	crmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"

	backupv1 "cairn.dev/apis/backup/v1"
	backupv1alpha1 "cairn.dev/apis/backup/v1alpha1"
	cairnv1 "cairn.dev/apis/meta/v1"
	"cairn.dev/libs/conditions"
	"cairn.dev/libs/manager"
	"cairn.dev/libs/testenv"
	"cairn.dev/operators/backup/internal/controller"
	"cairn.dev/operators/backup/internal/webhook"
)

type counter struct {
	next                  http.RoundTripper
	writes, events, reads atomic.Int64
}

func (c *counter) RoundTrip(r *http.Request) (*http.Response, error) {
	switch {
	case r.Method != http.MethodGet && strings.Contains(r.URL.Path, "/events"):
		c.events.Add(1)
	case r.Method != http.MethodGet:
		c.writes.Add(1)
	case r.URL.Query().Get("watch") == "":
		// A get or a list (an informer's initial list included; its
		// watches are not counted).
		c.reads.Add(1)
	}
	return c.next.RoundTrip(r)
}

func scheme() *k8sruntime.Scheme {
	s := k8sruntime.NewScheme()
	utilruntime.Must(clientgoscheme.AddToScheme(s))
	utilruntime.Must(backupv1.AddToScheme(s))
	utilruntime.Must(backupv1alpha1.AddToScheme(s))
	return s
}

func backupJob(ns string, i int) *backupv1.BackupJob {
	return &backupv1.BackupJob{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: fmt.Sprintf("db-%05d", i)},
		Spec: backupv1.BackupJobSpec{
			Database: cairnv1.DatabaseRef{Engine: cairnv1.PostgresEngine, Host: "db.svc", Database: "app",
				CredentialsSecretRef: cairnv1.LocalObjectReference{Name: "db"}},
			Schedule: "0 2 * * *", TimeZone: "Asia/Shanghai",
			Storage: cairnv1.StorageSpec{S3: &cairnv1.S3Storage{Endpoint: "s3:9000", Bucket: "backups",
				CredentialsSecretRef: cairnv1.LocalObjectReference{Name: "s3"}}},
		},
	}
}

// parallel runs f(i) for i in [0,n) on w workers.
func parallel(n, w int, f func(i int) error) error {
	var wg sync.WaitGroup
	var first atomic.Pointer[error]
	ch := make(chan int)
	for k := 0; k < w; k++ {
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
	for i := 0; i < n; i++ {
		ch <- i
	}
	close(ch)
	wg.Wait()
	if e := first.Load(); e != nil {
		return *e
	}
	return nil
}

func reconcileTotal() float64 {
	return counterSum("controller_runtime_reconcile_total", "controller", "backupjob")
}

// conversions is the number of requests the conversion webhook served (the
// API server converts between the stored v1 and the still-served v1alpha1).
func conversions() float64 {
	return counterSum("controller_runtime_webhook_requests_total", "webhook", webhook.ConvertPath)
}

// counterSum sums counter metric's series whose label has value.
func counterSum(metric, label, value string) float64 {
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

func heap() uint64 {
	runtime.GC()
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return ms.HeapAlloc
}

// Profile outputs (flags); each size overwrites the previous one.
var cpuProfile, memProfile, apiProfile string

// profileAPIServer writes, in the background, the API server's CPU profile
// of the next 10 seconds to file (nothing when -apiprofile is not set).
func profileAPIServer(ctx context.Context, env *testenv.Env, file string) {
	if apiProfile == "" {
		return
	}
	c := rest.CopyConfig(env.Config)
	c.GroupVersion = &corev1.SchemeGroupVersion
	c.NegotiatedSerializer = clientgoscheme.Codecs.WithoutConversion()
	go func() {
		rc, err := rest.RESTClientFor(c)
		must(err)
		raw, err := rc.Get().AbsPath("/debug/pprof/profile").Param("seconds", "10").Timeout(time.Minute).DoRaw(ctx)
		must(err)
		must(os.WriteFile(file, raw, 0o644))
	}()
}

func main() {
	sizes := flag.String("n", "100,1000", "comma-separated numbers of BackupJobs")
	workers := flag.Int("workers", 4, "operator --max-concurrent-reconciles, and client parallelism")
	flag.StringVar(&cpuProfile, "cpuprofile", "", "write a CPU profile of the operator's convergence (last size) to this file")
	flag.StringVar(&apiProfile, "apiprofile", "", "write the API server's CPU profile of the first 10 s of convergence (last size) to this file, and of the floor to its .floor.pprof sibling")
	flag.StringVar(&memProfile, "memprofile", "", "write a heap profile after convergence (last size) to this file")
	flag.Parse()
	if memProfile != "" {
		// Sample finely enough to attribute per-object memory (slows
		// allocation: take the times from a run without -memprofile).
		runtime.MemProfileRate = 4096
	}
	testenv.SetupLogging()
	root, err := testenv.RepoRoot()
	must(err)
	env, err := testenv.Start(testenv.Options{
		CRDDirectoryPaths:   []string{filepath.Join(root, "deploy/backup/crd/bases")},
		WebhookManifestDirs: []string{filepath.Join(root, "deploy/backup/webhook/generated")},
		Scheme:              scheme(),
	})
	must(err)
	stopEnv = func() { _ = env.Stop() }
	defer stopEnv()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()

	// The operator, counting its API writes; it only looks at namespaces named bench-*.
	opCount := &counter{}
	cfg := rest.CopyConfig(env.Config)
	cfg.WrapTransport = func(rt http.RoundTripper) http.RoundTripper { opCount.next = rt; return opCount }
	o := manager.New("backup")
	o.LeaderElection = false
	o.MetricsAddr, o.ProbeAddr = "0", "0"
	o.MaxConcurrentReconciles = *workers
	o.WebhookHost, o.WebhookPort, o.WebhookCertDir = env.Webhook.LocalServingHost, env.Webhook.LocalServingPort, env.Webhook.LocalServingCertDir

	fmt.Printf("# backup operator benchmark, %s, %d CPUs, GOMAXPROCS %d, %d workers\n", time.Now().UTC().Format("2006-01-02"), runtime.NumCPU(), runtime.GOMAXPROCS(0), *workers)
	fmt.Println("| N | converge s | floor s | ratio | writes/obj create | events/obj create | reconciles/obj create | reads/obj create | conversions/obj create | writes/obj resync | reconciles/obj resync | heap KiB/obj | CPU ms/obj floor (server / bench) | CPU ms/obj converge (server / bench) |")
	fmt.Println("|---|---|---|---|---|---|---|---|---|---|---|---|---|---|")
	for _, s := range strings.Split(*sizes, ",") {
		var n int
		_, err := fmt.Sscan(s, &n)
		must(err)
		runOne(ctx, env, o, cfg, opCount, n, *workers)
	}
	fmt.Println()
	for _, l := range cpuNotes {
		fmt.Println(l)
	}
}

// runOne measures one size with a fresh operator.
func runOne(ctx context.Context, env *testenv.Env, o *manager.Options, cfg *rest.Config, opCount *counter, n, workers int) {
	c := env.Client
	floorNS := fmt.Sprintf("floor-%d", n)
	benchNS := fmt.Sprintf("bench-%d", n)
	for _, ns := range []string{floorNS, benchNS} {
		must(c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}))
		// The Secrets every BackupJob names (the operator checks them
		// before it schedules anything).
		must(c.Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "db"},
			StringData: map[string]string{"username": "app", "password": "bench"}}))
		must(c.Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "s3"},
			StringData: map[string]string{"accessKeyID": "bench", "secretAccessKey": "bench"}}))
	}
	byObject := controller.CacheByObject()
	mopts := *o
	mgr, err := mopts.NewManager(cfg, scheme(), byObject)
	must(err)
	mctx, stop := context.WithCancel(ctx)
	defer stop()
	// Webhooks only until the floor is measured: admission must run for the
	// floor's BackupJobs too, but no controller may touch them.
	must(webhook.Setup(mgr))
	go func() { _ = mgr.Start(mctx) }()
	<-mgr.Elected()

	profileAPIServer(ctx, env, strings.TrimSuffix(apiProfile, ".pprof")+".floor.pprof")
	cpu0 := readCPU()
	// The floor: the same writes a bare client makes — create the BackupJob
	// (the finalizer by admission), create the very CronJob the operator
	// renders (controller reference included), patch the status once, create
	// one Event.
	t0 := time.Now()
	must(parallel(n, workers, func(i int) error {
		bj := backupJob(floorNS, i)
		if err := c.Create(ctx, bj); err != nil {
			return err
		}
		cj := controller.DesiredCronJob(bj, "agent:bench")
		if err := controllerutil.SetControllerReference(bj, cj, c.Scheme()); err != nil {
			return err
		}
		if err := c.Create(ctx, cj); err != nil {
			return err
		}
		orig := bj.DeepCopy()
		bj.Status.ObservedGeneration = bj.Generation
		bj.Status.Phase = backupv1.PhaseScheduled
		conditions.MarkReady(bj, "Scheduled", "floor")
		if err := c.Status().Patch(ctx, bj, client.MergeFrom(orig)); err != nil {
			return err
		}
		now := metav1.NowMicro()
		return c.Create(ctx, &eventsv1.Event{
			ObjectMeta: metav1.ObjectMeta{Namespace: floorNS, GenerateName: bj.Name + "-floor-"},
			EventTime:  now, ReportingController: "cairn.dev/bench-floor", ReportingInstance: "bench",
			Action: "PhaseScheduled", Reason: "Scheduled", Type: corev1.EventTypeNormal, Note: "the CronJob is in place; waiting for the first run",
			Regarding: corev1.ObjectReference{APIVersion: backupv1.GroupVersion.String(), Kind: "BackupJob", Namespace: floorNS, Name: bj.Name, UID: bj.UID},
		})
	}))
	floor := time.Since(t0)
	cpuFloor := readCPU().sub(cpu0)
	stop()

	// The operator, restricted to the bench namespace.
	mopts2 := *o
	mopts2.WatchNamespaces = []string{benchNS}
	mgr2, err := mopts2.NewManager(cfg, scheme(), byObject)
	must(err)
	r := &controller.BackupJobReconciler{Client: mgr2.GetClient(), APIReader: mgr2.GetAPIReader(), Scheme: mgr2.GetScheme(),
		Recorder: mgr2.GetEventRecorder("backup-operator"), AgentImage: "agent:bench"}
	copts := mopts2.ControllerOptions()
	copts.SkipNameValidation = ptr.To(true) // one controller per size, in one process
	must(r.SetupWithManager(mgr2, copts))
	must(webhook.Setup(mgr2))
	m2ctx, stop2 := context.WithCancel(ctx)
	defer stop2()
	h0 := heap()
	go func() { _ = mgr2.Start(m2ctx) }()
	<-mgr2.Elected()
	w0, e0, r0, g0, c0 := opCount.writes.Load(), opCount.events.Load(), reconcileTotal(), opCount.reads.Load(), conversions()

	if cpuProfile != "" {
		f, err := os.Create(cpuProfile)
		must(err)
		must(pprof.StartCPUProfile(f))
		defer f.Close()
	}
	// The CronJobs are listed only once every BackupJob is Ready (the
	// operator writes Ready after its CronJob): a poll costs one list of N.
	// resourceVersion 0: served from the API server's watch cache. A
	// consistent list may fall back to etcd, which decodes every object
	// through the conversion webhook while v1alpha1 is served (N webhook
	// calls per poll: the first run at N=10,000 counted 3.8 conversions per
	// BackupJob instead of 2).
	fromCache := &client.ListOptions{Namespace: benchNS, Raw: &metav1.ListOptions{ResourceVersion: "0"}}
	converged := func() bool {
		list := &backupv1.BackupJobList{}
		if err := c.List(ctx, list, fromCache); err != nil {
			return false
		}
		if len(list.Items) != n {
			return false
		}
		for i := range list.Items {
			b := &list.Items[i]
			if b.Status.ObservedGeneration != b.Generation || !conditions.IsTrue(b, cairnv1.ReadyCondition) {
				return false
			}
		}
		cjs := &batchv1.CronJobList{}
		if err := c.List(ctx, cjs, fromCache); err != nil {
			return false
		}
		return len(cjs.Items) == n
	}
	cpu1 := readCPU()
	t1 := time.Now()
	must(parallel(n, workers, func(i int) error { return c.Create(ctx, backupJob(benchNS, i)) }))
	// The poll's own cost grows with N (a list of N per poll): its interval
	// is at least 4× the last poll's duration, so it takes at most a fifth
	// of one core at any N instead of a share growing with N (50 ms
	// minimum, as before, for small N).
	for {
		p0 := time.Now()
		if converged() {
			break
		}
		if time.Since(t1) > 30*time.Minute {
			fatal("not converged after 30 minutes")
		}
		time.Sleep(max(50*time.Millisecond, 4*time.Since(p0)))
	}
	conv := time.Since(t1)
	cpuConv := readCPU().sub(cpu1)
	if cpuProfile != "" {
		pprof.StopCPUProfile()
	}
	settle(opCount)
	w1, e1, r1, g1, c1 := opCount.writes.Load(), opCount.events.Load(), reconcileTotal(), opCount.reads.Load(), conversions()
	h1 := heap()
	if memProfile != "" {
		f, err := os.Create(memProfile)
		must(err)
		must(pprof.Lookup("heap").WriteTo(f, 0))
		must(f.Close())
	}

	// Forced resync: touch every BackupJob (a label the controller ignores in
	// its result, but which passes the predicate), so each is reconciled once.
	must(parallel(n, workers, func(i int) error {
		return retry.RetryOnConflict(retry.DefaultRetry, func() error {
			b := &backupv1.BackupJob{}
			if err := c.Get(ctx, client.ObjectKey{Namespace: benchNS, Name: fmt.Sprintf("db-%05d", i)}, b); err != nil {
				return err
			}
			b.Labels = map[string]string{"resync": "1"}
			return c.Update(ctx, b)
		})
	}))
	deadline := time.Now().Add(5*time.Minute + time.Duration(n)*20*time.Millisecond)
	for reconcileTotal()-r1 < float64(n) && time.Now().Before(deadline) {
		time.Sleep(50 * time.Millisecond)
	}
	settle(opCount)
	w2, r2 := opCount.writes.Load(), reconcileTotal()

	fn := float64(n)
	perObj := func(t cpuTimes) string { return fmt.Sprintf("%.1f / %.1f", t.server*1000/fn, t.self*1000/fn) }
	fmt.Printf("| %d | %.2f | %.2f | %.2f | %.2f | %.2f | %.2f | %.2f | %.2f | %.2f | %.2f | %.1f | %s | %s |\n",
		n, conv.Seconds(), floor.Seconds(), conv.Seconds()/floor.Seconds(),
		float64(w1-w0)/fn, float64(e1-e0)/fn, (r1-r0)/fn, float64(g1-g0)/fn, (c1-c0)/fn,
		float64(w2-w1)/fn, (r2-r1)/fn, float64(int64(h1)-int64(h0))/1024/fn, perObj(cpuFloor), perObj(cpuConv))
	stop2()
	cpuNotes = append(cpuNotes, fmt.Sprintf("N=%d CPU s (API server + etcd / bench process): floor %s, converge %s",
		n, cpuFloor, cpuConv))
}

// cpuNotes are printed after the table.
var cpuNotes []string

// cpuTimes: CPU seconds used by the control plane (this process' children:
// kube-apiserver and etcd) and by this process (operator, webhooks, clients).
type cpuTimes struct{ server, self float64 }

func (a cpuTimes) sub(b cpuTimes) cpuTimes { return cpuTimes{a.server - b.server, a.self - b.self} }
func (a cpuTimes) String() string          { return fmt.Sprintf("%.1f / %.1f", a.server, a.self) }

func readCPU() cpuTimes {
	var t cpuTimes
	var ru syscall.Rusage
	if syscall.Getrusage(syscall.RUSAGE_SELF, &ru) == nil {
		t.self = time.Duration(ru.Utime.Nano() + ru.Stime.Nano()).Seconds()
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
		t.server += (utime + stime) / 100 // clock ticks (USER_HZ)
	}
	return t
}

// settle waits until the operator's write count stops moving for a second.
func settle(c *counter) {
	last := c.writes.Load() + c.events.Load()
	stable := time.Now()
	for time.Since(stable) < time.Second {
		time.Sleep(100 * time.Millisecond)
		if cur := c.writes.Load() + c.events.Load(); cur != last {
			last, stable = cur, time.Now()
		}
	}
}

// stopEnv stops the control plane; fatal calls it, so a failed run leaves no
// kube-apiserver or etcd behind.
var stopEnv func()

func fatal(format string, args ...any) {
	fmt.Fprintf(os.Stderr, "bench: "+format+"\n", args...)
	if stopEnv != nil {
		stopEnv()
	}
	os.Exit(1)
}

func must(err error) {
	if err != nil {
		fatal("%v", err)
	}
}
