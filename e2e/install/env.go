package install

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"cairn.dev/agent/testservers"
	backupv1 "cairn.dev/apis/backup/v1"
	backupv1alpha1 "cairn.dev/apis/backup/v1alpha1"
	migrationv1 "cairn.dev/apis/migration/v1"
	platformv1 "cairn.dev/apis/platform/v1"
	restorev1 "cairn.dev/apis/restore/v1"
	"cairn.dev/e2e/cluster"
	"cairn.dev/e2e/podrunner"
)

// Scheme has the built-in kinds, CRDs and Cairn's kinds.
func Scheme() *runtime.Scheme {
	s := runtime.NewScheme()
	utilruntime.Must(clientgoscheme.AddToScheme(s))
	utilruntime.Must(apiextensionsv1.AddToScheme(s))
	utilruntime.Must(backupv1.AddToScheme(s))
	utilruntime.Must(backupv1alpha1.AddToScheme(s))
	utilruntime.Must(restorev1.AddToScheme(s))
	utilruntime.Must(migrationv1.AddToScheme(s))
	utilruntime.Must(platformv1.AddToScheme(s))
	return s
}

// Options of a local platform.
type Options struct {
	// Root of the repository (platform/, operators/).
	Root string
	// Dir keeps binaries, certificates, kubeconfigs and logs; Workdir of the
	// cluster is Dir/kwok. Required.
	Dir string
	// BinDir holds already built operator binaries (<name>-operator); the
	// missing ones are built into it. Default Dir/bin.
	BinDir string
	// Nodes of the cluster.
	Nodes int
	// ClusterName; unique when empty.
	ClusterName string
	// Operators to start a process of, e.g. "backup", "restore". The whole
	// platform is installed either way.
	Operators []string
	// Binaries are operators to build before the cluster starts besides
	// Operators (a slow build must not eat into the cluster's life), for
	// processes a test starts itself.
	Binaries []string
	// Detach lets the operators outlive this process (the demo). Their
	// webhook Services are then the processes' own ports, so each operator
	// runs one process.
	Detach bool
	// RealData runs pods on the pod runner (cluster.Options.RealPods) and
	// starts the data servers (StartServers) before the cluster.
	RealData bool
	// ExternalData: with RealData, the caller starts the data servers and
	// the pod runner (cluster.StartPodRunner) in a process of its own, as the
	// demo does so they outlive it.
	ExternalData bool
	// AgentImage is cluster.Options.AgentImage.
	AgentImage string
	// PodRunnerNode is cluster.Options.PodRunnerNode; default
	// cairn-pods-<the working directory's name>: a test package's own, so
	// packages with real pods can run side by side (`make e2e` runs
	// tests/data beside the others) while a package's next run still
	// removes the containers its crashed run left.
	PodRunnerNode string
	// Installed runs the operators as the platform installs them (needs
	// RealData; installed.go): `kustomize build` of a local overlay of
	// platform/ (images from `make images`, webhook certificates the
	// no-cert-manager way) applied whole, the Deployments' pods — two
	// replicas each — running as containers on the pod runner, their
	// webhooks reached through their Services. No operator process is
	// started (Operators and Binaries are ignored); Up waits until every
	// Deployment has rolled out.
	Installed bool
	// Logf receives progress lines.
	Logf func(string, ...any)
}

// TokenTTL is how long the operators' ServiceAccount tokens are valid.
const TokenTTL = 7 * 24 * time.Hour

// Env is a running cluster with the platform installed and operator processes.
type Env struct {
	Cluster *cluster.Cluster
	Client  client.Client
	// Operators holds the first process of each operator Up started.
	Operators map[string]*Operator
	// Processes are all operator processes started, in order.
	Processes []*Operator
	// Services stand in for each operator's webhook Service.
	Services map[string]*Service
	// Manifests are the objects of `kustomize build platform`.
	Manifests []*unstructured.Unstructured
	// Servers are the data servers (RealData), else nil.
	Servers *Servers
	Opts    Options
}

// Up builds the operators, starts the cluster, installs the platform from
// `kustomize build platform`, starts one process of each of o.Operators and
// waits until they are ready. On an error it stops what it started.
func Up(ctx context.Context, o Options) (_ *Env, err error) {
	if o.Logf == nil {
		o.Logf = func(string, ...any) {}
	}
	if o.BinDir == "" {
		o.BinDir = filepath.Join(o.Dir, "bin")
	}
	if err := os.MkdirAll(o.BinDir, 0o755); err != nil {
		return nil, err
	}
	if o.Installed {
		if !o.RealData {
			return nil, errors.New("platform: Installed needs RealData (the pod runner runs the operators' pods)")
		}
		o.Operators, o.Binaries = nil, nil
	}
	for _, name := range append(append([]string{}, o.Operators...), o.Binaries...) {
		if err := ensureBinary(ctx, o, name); err != nil {
			return nil, err
		}
	}
	objs, err := Manifests(filepath.Join(o.Root, "platform"))
	if err != nil {
		return nil, err
	}
	var certs map[string]*Certs
	var images map[string]string
	if o.Installed {
		if certs, err = WebhookCerts(filepath.Join(o.Dir, "certs"), OperatorNames(objs)); err != nil {
			return nil, err
		}
		overlay := filepath.Join(o.Dir, "overlay")
		if err := WriteOverlay(overlay, filepath.Join(o.Root, "platform"), objs, certs); err != nil {
			return nil, err
		}
		if objs, err = Manifests(overlay); err != nil {
			return nil, err
		}
		images = map[string]string{}
		for _, name := range OperatorNames(objs) {
			img := OperatorImage(name)
			images[img[:strings.LastIndex(img, ":")]] = img // the runner checks they are on the engine
		}
	}
	var servers *Servers
	if o.RealData && !o.ExternalData {
		if servers, err = StartServers(o.Logf); err != nil {
			return nil, err
		}
	}
	c, err := cluster.Start(ctx, cluster.Options{Name: o.ClusterName, Nodes: o.Nodes, Workdir: filepath.Join(o.Dir, "kwok"),
		RealPods: o.RealData, ExternalPodRunner: o.ExternalData, PodRunnerNode: o.podRunnerNode(), AgentImage: o.AgentImage, Images: images, Logf: o.Logf})
	if err != nil {
		servers.Stop()
		return nil, err
	}
	e := &Env{Cluster: c, Operators: map[string]*Operator{}, Services: map[string]*Service{}, Manifests: objs, Servers: servers, Opts: o}
	defer func() {
		if err != nil && os.Getenv("CAIRN_E2E_KEEP") == "" {
			_ = e.Down()
		}
	}()
	if e.Client, err = c.Client(Scheme()); err != nil {
		return nil, err
	}
	if o.Installed {
		return e, e.upInstalled(ctx, certs)
	}
	for _, name := range OperatorNames(objs) {
		if e.Services[name], err = NewService(name, filepath.Join(o.Dir, "certs", name), !o.Detach); err != nil {
			return nil, err
		}
	}
	start := time.Now()
	skipped, err := Install(ctx, e.Client, objs, e.Services)
	if err != nil {
		return nil, err
	}
	o.Logf("installed the platform (%d objects) in %s; not applied: %s", len(objs)-len(skipped),
		time.Since(start).Round(time.Millisecond), strings.Join(skipped, ", "))
	for _, name := range o.Operators {
		op, err := e.StartOperator(ctx, name, "", nil)
		if err != nil {
			return nil, err
		}
		e.Operators[name] = op
	}
	return e, nil
}

// upInstalled applies the overlay's objects whole and waits until every
// operator's Deployment has rolled out.
func (e *Env) upInstalled(ctx context.Context, certs map[string]*Certs) error {
	start := time.Now()
	if err := InstallShipped(ctx, e.Client, e.Manifests, certs); err != nil {
		return err
	}
	e.Opts.Logf("installed the platform as shipped (%d objects, Deployments included) in %s", len(e.Manifests), time.Since(start).Round(time.Millisecond))
	if e.Opts.ExternalData {
		return nil // the caller starts the pod runner, then WaitOperators
	}
	return e.WaitOperators(ctx)
}

// WaitOperators waits until every operator's Deployment has rolled out
// (Installed).
func (e *Env) WaitOperators(ctx context.Context) error {
	start := time.Now()
	for _, name := range OperatorNames(e.Manifests) {
		if err := WaitDeployment(ctx, e.Client, name, 3*time.Minute); err != nil {
			e.dumpOperatorPods()
			return err
		}
		e.Opts.Logf("%s operator: Deployment rolled out (%s)", name, time.Since(start).Round(time.Millisecond))
	}
	return nil
}

// ensureBinary builds operator name into o.BinDir unless it is there.
func ensureBinary(ctx context.Context, o Options, name string) error {
	if _, err := os.Stat(filepath.Join(o.BinDir, name+"-operator")); err == nil {
		return nil
	}
	start := time.Now()
	if _, err := Build(ctx, o.Root, o.BinDir, name); err != nil {
		return err
	}
	o.Logf("built the %s operator in %s", name, time.Since(start).Round(time.Millisecond))
	return nil
}

// StartOperator starts a process of operator name as its Deployment would
// run it — the container's arguments, the identity of its ServiceAccount, the
// Lease in the Deployment's namespace — plus extra flags, logging to
// Dir/<name><suffix>.log; once it is ready it becomes an endpoint of the
// operator's Service.
func (e *Env) StartOperator(ctx context.Context, name, suffix string, extra []string) (*Operator, error) {
	svc, ok := e.Services[name]
	if !ok {
		return nil, fmt.Errorf("platform: the platform has no %s operator", name)
	}
	dep, err := OperatorDeployment(e.Manifests, name)
	if err != nil {
		return nil, err
	}
	if err := ensureBinary(ctx, e.Opts, name); err != nil {
		return nil, err
	}
	kubeconfig := filepath.Join(e.Opts.Dir, name+".kubeconfig")
	if _, err := os.Stat(kubeconfig); err != nil {
		if err := ServiceAccountKubeconfig(ctx, e.Client, e.Cluster.Config, dep.Namespace, dep.ServiceAccount, kubeconfig, TokenTTL); err != nil {
			return nil, err
		}
	}
	port := svc.Port
	if svc.Proxy() {
		if port, err = testservers.FreePort(); err != nil {
			return nil, err
		}
	} else {
		for _, p := range e.Processes {
			if p.Operator == name && !p.Exited() {
				return nil, fmt.Errorf("platform: a %s process runs already (without a proxy the Service is its port)", name)
			}
		}
	}
	op := &Operator{Name: name + suffix, Operator: name, Binary: filepath.Join(e.Opts.BinDir, name+"-operator"),
		Kubeconfig: kubeconfig, Service: svc, WebhookPort: port,
		Args:    append(dep.Args, "--leader-election-namespace="+dep.Namespace),
		Extra:   extra,
		LogPath: filepath.Join(e.Opts.Dir, name+suffix+".log"), Detach: e.Opts.Detach}
	start := time.Now()
	for attempt := 1; ; attempt++ {
		if err := op.Start(); err != nil {
			return nil, err
		}
		if attempt == 1 {
			e.Processes = append(e.Processes, op)
		}
		err := op.WaitReady(ctx)
		if err == nil {
			break
		}
		_ = op.Kill()
		// A port drawn free was taken before the process bound it (by a
		// process of another package running beside this one): Start
		// draws new probe and metrics ports.
		if attempt < 3 && strings.Contains(op.Tail(5), "address already in use") {
			e.Opts.Logf("%s operator: a port was taken before it could bind it; starting it again", op.Name)
			continue
		}
		return nil, err
	}
	if svc.Proxy() {
		svc.AddBackend(port)
	}
	e.Opts.Logf("%s operator ready in %s (pid %d, log %s)", op.Name, time.Since(start).Round(time.Millisecond), op.Cmd.Process.Pid, op.LogPath)
	return op, nil
}

// Down stops the operators and deletes the cluster.
func (e *Env) Down() error {
	var errs []error
	for _, op := range e.Processes {
		errs = append(errs, op.Stop())
	}
	for _, s := range e.Services {
		errs = append(errs, s.Close())
	}
	if e.Cluster != nil {
		errs = append(errs, e.Cluster.Stop())
	}
	e.Servers.Stop()
	return errors.Join(errs...)
}

// String describes where things are.
func (e *Env) String() string {
	return fmt.Sprintf("cluster %s, kubeconfig %s", e.Cluster.Name, e.Cluster.Kubeconfig)
}

func (o Options) podRunnerNode() string {
	if o.PodRunnerNode != "" || o.ExternalData {
		return o.PodRunnerNode
	}
	wd, err := os.Getwd()
	if err != nil {
		return ""
	}
	return podrunner.DefaultNodeName + "-" + strings.ToLower(filepath.Base(wd))
}
