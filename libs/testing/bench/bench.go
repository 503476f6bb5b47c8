// Package bench is the harness of the operator benchmarks (`make bench`):
// one operator on a real kube-apiserver + etcd (libs/testing/testenv), in-process
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
	"os"
	"runtime"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/apiutil"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	"cairn.dev/libs/manager"
	"cairn.dev/libs/testing/testenv"
)

// AgentImage is the agent image an operator that runs the agent is given
// (--agent-image, unless Kind.Args say otherwise): no pod runs here.
const AgentImage = "agent:bench"

// Kind is what one operator's bench supplies.
type Kind struct {
	// Title heads the output; empty: "<operator's name> operator".
	Title string
	// Object is the kind's name; empty: New's kind (e.g. "BackupJob").
	Object string
	// Controller is the controller's name in the reconcile metrics; empty:
	// Object in lower case (libs/reconcile names every controller so).
	Controller string
	// Bases are the deploy bases (deploy/<base>) whose CRDs the control
	// plane installs; the first one's webhook configurations are served by
	// the operator. The scheme is the operator's.
	Bases []string
	// Env is what the control plane installs when Bases is empty (CRDs,
	// webhooks, scheme).
	Env testenv.Options
	// Operator is the operator as its main wires it (operator.New, given
	// the version "bench"); Args are its flags, nil: --agent-image=AgentImage
	// for an operator that declares that flag. The harness adds
	// --watch-namespaces and --max-concurrent-reconciles.
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
	return testenv.ForOperator(k.Operator("bench"), k.Bases...)
}

// complete fills what k leaves to its defaults (Title, Object, Controller,
// Args).
func (k Kind) complete() (Kind, error) {
	op := k.Operator("bench")
	if k.Title == "" {
		k.Title = op.Name + " operator"
	}
	if k.Args == nil && op.AgentImage != "" {
		k.Args = []string{"--agent-image=" + AgentImage}
	}
	if k.Object == "" {
		scheme, err := op.Scheme()
		if err != nil {
			return k, err
		}
		gvk, err := apiutil.GVKForObject(k.New("bench", 0), scheme)
		if err != nil {
			return k, err
		}
		k.Object = gvk.Kind
	}
	if k.Controller == "" {
		k.Controller = strings.ToLower(k.Object)
	}
	return k, nil
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

// CreateOwned creates child with owner as its controller (the floor's
// children, as an operator's applier creates them).
func CreateOwned(ctx context.Context, c client.Client, owner, child client.Object) error {
	if err := controllerutil.SetControllerReference(owner, child, c.Scheme()); err != nil {
		return err
	}
	return c.Create(ctx, child)
}

// PatchStatus applies change to obj's status and writes it with a merge
// patch (the floor's status writes).
func PatchStatus(ctx context.Context, c client.Client, obj client.Object, change func()) error {
	orig := obj.DeepCopyObject().(client.Object)
	change()
	return c.Status().Patch(ctx, obj, client.MergeFrom(orig))
}

// Transition creates the Normal Event an operator's transition writes
// about obj (Event, with obj's kind from c's scheme).
func Transition(ctx context.Context, c client.Client, obj client.Object, reason, action, note string) error {
	gvk, err := apiutil.GVKForObject(obj, c.Scheme())
	if err != nil {
		return err
	}
	return Event(ctx, c, obj, gvk.GroupVersion().String(), gvk.Kind, corev1.EventTypeNormal, reason, action, note)
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
	k, err := k.complete()
	if err != nil {
		fmt.Fprintf(os.Stderr, "bench: %v\n", err)
		os.Exit(1)
	}
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
