package platform

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"k8s.io/apimachinery/pkg/runtime"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"sigs.k8s.io/controller-runtime/pkg/client"

	backupv1 "cairn.dev/apis/backup/v1"
	backupv1alpha1 "cairn.dev/apis/backup/v1alpha1"
	restorev1 "cairn.dev/apis/restore/v1"
	"cairn.dev/e2e/cluster"
)

// Scheme has the built-in kinds and Cairn's.
func Scheme() *runtime.Scheme {
	s := runtime.NewScheme()
	utilruntime.Must(clientgoscheme.AddToScheme(s))
	utilruntime.Must(backupv1.AddToScheme(s))
	utilruntime.Must(backupv1alpha1.AddToScheme(s))
	utilruntime.Must(restorev1.AddToScheme(s))
	return s
}

// Options of a local platform.
type Options struct {
	// Root of the repository (deploy/, operators/).
	Root string
	// Dir keeps binaries, certificates and logs; Workdir of the cluster is
	// Dir/kwok. Required.
	Dir string
	// BinDir holds already built operator binaries (<name>-operator); the
	// missing ones are built into it. Default Dir/bin.
	BinDir string
	// Nodes of the cluster.
	Nodes int
	// ClusterName; unique when empty.
	ClusterName string
	// Operators to install and start, e.g. "backup", "restore".
	Operators []string
	// Webhooks serves and installs the operators' webhooks.
	Webhooks bool
	// Detach lets the operators outlive this process.
	Detach bool
	// Logf receives progress lines.
	Logf func(string, ...any)
}

// Env is a running cluster with operators.
type Env struct {
	Cluster   *cluster.Cluster
	Client    client.Client
	Operators map[string]*Operator
	Opts      Options
}

// Up starts the cluster, installs and starts the operators and waits until
// they are ready. On an error it stops what it started.
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
	bins := map[string]string{}
	for _, name := range o.Operators {
		bin := filepath.Join(o.BinDir, name+"-operator")
		if _, err := os.Stat(bin); err != nil {
			start := time.Now()
			if bin, err = Build(ctx, o.Root, o.BinDir, name); err != nil {
				return nil, err
			}
			o.Logf("built the %s operator in %s", name, time.Since(start).Round(time.Millisecond))
		}
		bins[name] = bin
	}
	c, err := cluster.Start(ctx, cluster.Options{Name: o.ClusterName, Nodes: o.Nodes, Workdir: filepath.Join(o.Dir, "kwok"), Logf: o.Logf})
	if err != nil {
		return nil, err
	}
	e := &Env{Cluster: c, Operators: map[string]*Operator{}, Opts: o}
	defer func() {
		if err != nil {
			_ = e.Down()
		}
	}()
	if e.Client, err = c.Client(Scheme()); err != nil {
		return nil, err
	}
	for _, name := range o.Operators {
		op, err := e.StartOperator(ctx, name, bins[name], o.Webhooks, "", nil)
		if err != nil {
			return nil, err
		}
		e.Operators[name] = op
	}
	return e, nil
}

// StartOperator installs the named operator's CRDs (and webhooks when
// webhooks is true) and starts a process of it, logging to Dir/<name><suffix>.log.
func (e *Env) StartOperator(ctx context.Context, name, bin string, webhooks bool, suffix string, args []string) (*Operator, error) {
	if bin == "" {
		bin = filepath.Join(e.Opts.BinDir, name+"-operator")
	}
	var wh *Webhook
	if webhooks {
		port, err := FreePort()
		if err != nil {
			return nil, err
		}
		certs, err := NewCerts(filepath.Join(e.Opts.Dir, "certs", name+suffix))
		if err != nil {
			return nil, err
		}
		wh = &Webhook{Port: port, Certs: certs}
	}
	if err := Install(ctx, e.Cluster.Config, e.Opts.Root, name, wh); err != nil {
		return nil, err
	}
	op := &Operator{Name: name + suffix, Binary: bin, Kubeconfig: e.Cluster.Kubeconfig, Webhook: wh, Args: args,
		LogPath: filepath.Join(e.Opts.Dir, name+suffix+".log"), Detach: e.Opts.Detach}
	start := time.Now()
	if err := op.Start(); err != nil {
		return nil, err
	}
	if err := op.WaitReady(ctx); err != nil {
		_ = op.Kill()
		return nil, err
	}
	e.Opts.Logf("%s operator ready in %s (pid %d, log %s)", name+suffix, time.Since(start).Round(time.Millisecond), op.Cmd.Process.Pid, op.LogPath)
	return op, nil
}

// Down stops the operators and deletes the cluster.
func (e *Env) Down() error {
	var errs []error
	for _, op := range e.Operators {
		errs = append(errs, op.Stop())
	}
	if e.Cluster != nil {
		errs = append(errs, e.Cluster.Stop())
	}
	return errors.Join(errs...)
}

// String describes where things are.
func (e *Env) String() string {
	return fmt.Sprintf("cluster %s, kubeconfig %s", e.Cluster.Name, e.Cluster.Kubeconfig)
}
