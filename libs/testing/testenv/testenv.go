// Package testenv starts a real kube-apiserver and etcd for integration tests,
// from the binaries `make controlplane` builds into bin/, installs the given CRD
// folders and webhook manifests, and hands back a client.
//
// A test package's TestMain is one call: Main (one environment) or MainFunc
// (anything more, e.g. two clusters for a remote client). An operator runs
// in-process exactly as its main wires it (Env.StartOperator with its
// manager.Operator), and, with a config from Env.AsGeneratedRole, with
// nothing but its generated ClusterRole and leader-election Role — so the
// suite proves the RBAC too. Kubeconfig turns a config into the
// self-contained kubeconfig a Secret would hold.
//
// A missing binary is a test failure that says how to get it, never a skip.
package testenv

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
)

// ControlPlaneDirEnv overrides where the control-plane binaries are looked for.
const ControlPlaneDirEnv = "CAIRN_CONTROLPLANE_DIR"

// Options say what to install into the test API server.
type Options struct {
	// CRDDirectoryPaths are folders (or files) of CRD manifests to install.
	CRDDirectoryPaths []string
	// WebhookManifestDirs are folders of webhook configurations to install;
	// envtest points them at a local webhook server (see Env.Webhook).
	WebhookManifestDirs []string
	// Scheme for the returned client; defaults to client-go's scheme plus
	// apiextensions. Kinds that are conversion-capable in this scheme get
	// their CRD's conversion webhook pointed at the local webhook server.
	Scheme *runtime.Scheme
}

// Env is a running kube-apiserver + etcd.
type Env struct {
	// Config connects as cluster admin.
	Config *rest.Config
	// Client is an uncached client with Config and Scheme.
	Client client.Client
	// Scheme the client uses.
	Scheme *runtime.Scheme
	// Webhook says where a webhook server must listen for the installed
	// webhook configurations to reach it (LocalServingHost/Port/CertDir).
	Webhook *envtest.WebhookInstallOptions

	env *envtest.Environment
}

// RepoRoot is the folder holding go.work, found from the working directory up.
func RepoRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.work")); err == nil {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", errors.New("testenv: no go.work above the working directory; run the tests inside the Cairn repository")
		}
		dir = parent
	}
}

// ControlPlaneDir is the folder with kube-apiserver and etcd: see FindControlPlane.
func ControlPlaneDir() (string, error) {
	return FindControlPlane("", "kube-apiserver", "etcd")
}

// FindControlPlane returns dir, else $CAIRN_CONTROLPLANE_DIR, else
// bin/controlplane-<hack/controlplane/VERSION> under the repo root, after
// checking that every binary in bins is there. It fails, saying how to build
// them, when one is missing.
func FindControlPlane(dir string, bins ...string) (string, error) {
	if dir == "" {
		dir = os.Getenv(ControlPlaneDirEnv)
	}
	if dir == "" {
		root, err := RepoRoot()
		if err != nil {
			return "", err
		}
		v, err := os.ReadFile(filepath.Join(root, "hack", "controlplane", "VERSION"))
		if err != nil {
			return "", fmt.Errorf("testenv: reading the control-plane version: %w", err)
		}
		dir = filepath.Join(root, "bin", "controlplane-"+strings.TrimSpace(string(v)))
	}
	for _, bin := range bins {
		if fi, err := os.Stat(filepath.Join(dir, bin)); err != nil || fi.Mode()&0o111 == 0 {
			return "", fmt.Errorf("%s not found in %s: run `make controlplane` at the repository root (builds it from Go modules, ~15 min the first time)", bin, dir)
		}
	}
	return dir, nil
}

// Start starts kube-apiserver and etcd and installs what opts names.
func Start(opts Options) (*Env, error) {
	dir, err := ControlPlaneDir()
	if err != nil {
		return nil, err
	}
	sch := opts.Scheme
	if sch == nil {
		sch = runtime.NewScheme()
		utilruntime.Must(clientgoscheme.AddToScheme(sch))
	}
	utilruntime.Must(apiextensionsv1.AddToScheme(sch))

	te := &envtest.Environment{
		BinaryAssetsDirectory:    dir,
		Scheme:                   sch,
		CRDDirectoryPaths:        opts.CRDDirectoryPaths,
		ErrorIfCRDPathMissing:    true,
		ControlPlaneStartTimeout: 2 * time.Minute,
		ControlPlaneStopTimeout:  time.Minute,
		WebhookInstallOptions:    envtest.WebhookInstallOptions{Paths: opts.WebhookManifestDirs},
		CRDInstallOptions:        envtest.CRDInstallOptions{Scheme: sch},
	}
	cfg, err := te.Start()
	if err != nil {
		// A start step after launching the processes can fail: stop them.
		_ = te.Stop()
		return nil, fmt.Errorf("testenv: starting kube-apiserver and etcd from %s: %w", dir, err)
	}
	cfg.QPS, cfg.Burst = 500, 1000
	c, err := client.New(cfg, client.Options{Scheme: sch})
	if err != nil {
		_ = te.Stop()
		return nil, err
	}
	return &Env{Config: cfg, Client: c, Scheme: sch, Webhook: &te.WebhookInstallOptions, env: te}, nil
}

// Stop stops the API server and etcd and removes their data.
func (e *Env) Stop() error {
	if e == nil || e.env == nil {
		return nil
	}
	return e.env.Stop()
}

// AddUser creates a user authenticated by a client certificate, in the given
// groups, and returns a config that connects as that user. Used to run an
// operator with nothing but its generated RBAC.
func (e *Env) AddUser(name string, groups ...string) (*rest.Config, error) {
	u, err := e.env.AddUser(envtest.User{Name: name, Groups: groups}, e.Config)
	if err != nil {
		return nil, err
	}
	cfg := u.Config()
	cfg.QPS, cfg.Burst = e.Config.QPS, e.Config.Burst
	return cfg, nil
}

// Namespace creates a namespace with a generated name and returns its name.
func (e *Env) Namespace(ctx context.Context, prefix string) (string, error) {
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: prefix + "-"}}
	if err := e.Client.Create(ctx, ns); err != nil {
		return "", err
	}
	return ns.Name, nil
}
