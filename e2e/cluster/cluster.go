// Package cluster starts a full local Kubernetes control plane for end-to-end
// tests and the demo: etcd, kube-apiserver, kube-controller-manager and
// kube-scheduler from the binaries `make controlplane` builds, with kwok
// standing in for kubelets, all run by kwokctl's binary runtime.
//
// CronJobs really fire, Jobs really create Pods, and kwok moves the Pods
// through their phases by the Stages in stages.yaml (see there: how a pod is
// made to fail, and where its termination message comes from).
//
// Nothing lands in $HOME or the repository: kwokctl's work directory and the
// kubeconfig live in a folder of their own that Stop removes.
package cluster

import (
	"context"
	_ "embed"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"cairn.dev/agent/testservers"
	"cairn.dev/e2e/podrunner"
	"cairn.dev/libs/testing/testenv"
)

// ControlPlaneDirEnv names the folder with the control-plane binaries.
const ControlPlaneDirEnv = testenv.ControlPlaneDirEnv

// Binaries the binary runtime needs, as named in the control-plane folder.
var Binaries = []string{"etcd", "kube-apiserver", "kube-controller-manager", "kube-scheduler", "kwok", "kwokctl"}

// Stages is the kwok Stage configuration of every cluster (stages.yaml).
//
//go:embed stages.yaml
var Stages []byte

// Well-known knobs of the Stages.
const (
	// FailLabel on a Job pod makes it fail with the label's value as exit code.
	FailLabel = "cairn.dev/e2e-fail"
	// FailHost as a BackupJob's or RestoreJob's database host makes its agent
	// pods fail (exit code 1).
	FailHost = "fail.invalid"
	// ConfigErrorHost as a BackupJob's or RestoreJob's database host makes
	// its agent pods fail with exit code 2, the agent's configuration error,
	// which the Job's podFailurePolicy fails at once.
	ConfigErrorHost = "config.invalid"
	// TerminationMessageAnnotation on a Job pod becomes its first container's
	// termination message.
	TerminationMessageAnnotation = "cairn.dev/e2e-termination-message"
)

// Options of a cluster.
type Options struct {
	// Name of the cluster; a unique one is made when empty.
	Name string
	// Nodes is how many kwok nodes to create (default 1).
	Nodes int
	// ControlPlaneDir holds the binaries; default $CAIRN_CONTROLPLANE_DIR, else
	// bin/controlplane-<hack/controlplane/VERSION> under the repository root.
	ControlPlaneDir string
	// Workdir is where kwokctl keeps the cluster; a new temporary folder when
	// empty. Stop removes it either way.
	Workdir string
	// RealPods adds the pod runner's node (e2e/podrunner): pods run as real
	// containers of the local agent image (or local processes where no
	// Docker engine answers). The kwok nodes are then tainted FakeTaint, so
	// the scheduler places every pod on the pod runner; without RealPods
	// kwok's Stages play every pod (stages.yaml).
	RealPods bool
	// ExternalPodRunner: with RealPods, the caller starts the pod runner
	// (StartPodRunner) — the demo runs it in a process of its own that
	// outlives `demo up`. Pods wait Pending until its node is Ready.
	ExternalPodRunner bool
	// PodRunnerNode names the pod runner's node (default
	// podrunner.DefaultNodeName). Two clusters with real pods side by side
	// need different names: a runner removes, when it starts, the containers
	// another runner of the same node name left, and container names carry
	// the node's name.
	PodRunnerNode string
	// AgentImage is the local image run for the platform's agent image
	// (AgentRepository:<any tag>); default $CAIRN_AGENT_IMAGE, else
	// DefaultAgentImage (`make images`).
	AgentImage string
	// Images are more entries of the pod runner's image map (repository →
	// local image), e.g. the operators' images of an installed platform.
	Images map[string]string
	// Logf receives progress lines; nil discards them.
	Logf func(format string, args ...any)
}

// FakeTaint is the taint (effect NoSchedule) of the kwok nodes of a cluster
// with RealPods: no pod lands on a fake kubelet there.
const FakeTaint = "cairn.dev/fake-kubelet"

// AgentRepository is the platform's agent image without its tag.
const AgentRepository = "ghcr.io/cairn-dev/agent"

// DefaultAgentImage is the agent image `make images` builds.
const DefaultAgentImage = "cairn.local/agent:dev"

// Cluster is a running control plane.
type Cluster struct {
	Name string
	// Workdir is kwokctl's KWOK_WORKDIR (and holds Kubeconfig).
	Workdir string
	// Kubeconfig is the path of an admin kubeconfig.
	Kubeconfig string
	// Config connects as cluster admin.
	Config *rest.Config
	// Started is how long creating the cluster and its nodes took.
	Started time.Duration
	// Pods is the pod runner (RealPods), else nil.
	Pods *podrunner.Runner

	dir      string
	logf     func(string, ...any)
	mu       sync.Mutex
	started  []*os.Process // components RestartComponent started
	stopOnce sync.Once
	stopErr  error
}

// RepoRoot is the folder holding go.work (libs/testing/testenv's lookup).
func RepoRoot() (string, error) { return testenv.RepoRoot() }

// ControlPlaneDir finds the binaries (dir, else $CAIRN_CONTROLPLANE_DIR, else
// bin/controlplane-<version>) and fails, saying how to build them, when one is
// missing.
func ControlPlaneDir(dir string) (string, error) {
	return testenv.FindControlPlane(dir, Binaries...)
}

// Start creates the cluster, waits for it and its nodes, and returns it. On an
// error nothing is left running.
func Start(ctx context.Context, o Options) (_ *Cluster, err error) {
	dir, err := ControlPlaneDir(o.ControlPlaneDir)
	if err != nil {
		return nil, err
	}
	if o.Name == "" {
		o.Name = fmt.Sprintf("cairn-e2e-%d-%d", os.Getpid(), time.Now().UnixNano()%1e6)
	}
	if o.Nodes == 0 {
		o.Nodes = 1
	}
	if o.Workdir == "" {
		if o.Workdir, err = os.MkdirTemp("", "cairn-kwok-"); err != nil {
			return nil, err
		}
	} else if err := os.MkdirAll(o.Workdir, 0o755); err != nil {
		return nil, err
	}
	c := &Cluster{Name: o.Name, Workdir: o.Workdir, Kubeconfig: filepath.Join(o.Workdir, "kubeconfig"), dir: dir, logf: o.Logf}
	if c.logf == nil {
		c.logf = func(string, ...any) {}
	}
	defer func() {
		if err != nil {
			_ = c.Stop()
		}
	}()
	start := time.Now()
	stages := filepath.Join(o.Workdir, "stages.yaml")
	config := Stages
	if o.RealPods {
		config = append(append(append([]byte{}, Stages...), "\n"...), kwokOwnNodesOnly...)
		config = append(config, hostSANs()...)
	}
	if err := os.WriteFile(stages, config, 0o644); err != nil {
		return nil, err
	}
	// Below the kernel's ephemeral range (testservers.FreePort):
	// RestartComponent kills the API server and starts it again on the
	// same port, which no other process's listener or connection may take
	// meanwhile — a port from the ephemeral range made the restart test
	// flaky.
	apiserverPort, err := testservers.FreePort()
	if err != nil {
		return nil, err
	}
	unlock, err := lockCreate()
	if err != nil {
		return nil, err
	}
	err = c.kwokctl(ctx, "create", "cluster", "--name", c.Name, "--runtime", "binary",
		"--etcd-binary", filepath.Join(dir, "etcd"),
		"--kube-apiserver-binary", filepath.Join(dir, "kube-apiserver"),
		"--kube-controller-manager-binary", filepath.Join(dir, "kube-controller-manager"),
		"--kube-scheduler-binary", filepath.Join(dir, "kube-scheduler"),
		"--kwok-controller-binary", filepath.Join(dir, "kwok"),
		"--config", stages,
		"--kubeconfig", c.Kubeconfig,
		"--kube-apiserver-port", strconv.Itoa(apiserverPort),
		"--wait", "2m")
	unlock()
	if err != nil {
		return nil, err
	}
	if err := c.kwokctl(ctx, "scale", "node", "--name", c.Name, "--replicas", strconv.Itoa(o.Nodes)); err != nil {
		return nil, err
	}
	if c.Config, err = clientcmd.BuildConfigFromFlags("", c.Kubeconfig); err != nil {
		return nil, fmt.Errorf("cluster: reading %s: %w", c.Kubeconfig, err)
	}
	c.Config.QPS, c.Config.Burst = 200, 400
	if err := c.waitNodesReady(ctx, o.Nodes); err != nil {
		return nil, err
	}
	if o.RealPods {
		if err := c.taintKwokNodes(ctx); err != nil {
			return nil, err
		}
		if !o.ExternalPodRunner {
			if c.Pods, err = startPodRunner(ctx, c.Config, c.Workdir, o.PodRunnerNode, o.AgentImage, o.Images, c.logf); err != nil {
				return nil, err
			}
		}
	}
	c.Started = time.Since(start)
	c.logf("cluster %s: %d node(s) ready in %s (workdir %s)", c.Name, o.Nodes, c.Started.Round(time.Millisecond), c.Workdir)
	return c, nil
}

// StartT starts a cluster for a test and stops it when the test ends, passed
// or failed.
func StartT(t testing.TB, o Options) *Cluster {
	t.Helper()
	if o.Logf == nil {
		o.Logf = t.Logf
	}
	c, err := Start(context.Background(), o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if t.Failed() {
			c.DumpLogs(t.Logf)
		}
		if err := c.Stop(); err != nil {
			t.Errorf("stopping the cluster: %v", err)
		}
	})
	return c
}

// Client returns an uncached client with scheme s.
func (c *Cluster) Client(s *runtime.Scheme) (client.Client, error) {
	return client.New(c.Config, client.Options{Scheme: s})
}

// Stop deletes the cluster (its processes end) and removes its work
// directory. It is safe to call more than once and from a signal handler.
func (c *Cluster) Stop() error {
	c.stopOnce.Do(func() {
		var podsErr error
		if c.Pods != nil {
			podsErr = c.Pods.Stop()
		}
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		err := c.kwokctl(ctx, "delete", "cluster", "--name", c.Name, "--kubeconfig", c.Kubeconfig)
		c.mu.Lock()
		for _, p := range c.started {
			_ = p.Kill()
		}
		c.mu.Unlock()
		c.stopErr = errors.Join(podsErr, err, os.RemoveAll(c.Workdir))
		c.logf("cluster %s: deleted", c.Name)
	})
	return c.stopErr
}

// StopOnSignal stops the cluster, runs also (e.g. stopping operators), and
// exits when the process gets SIGINT or SIGTERM: so Ctrl-C leaves nothing
// running. The returned function uninstalls the handler.
func (c *Cluster) StopOnSignal(also func()) func() {
	ch := make(chan os.Signal, 1)
	signal.Notify(ch, os.Interrupt, syscall.SIGTERM)
	done := make(chan struct{})
	go func() {
		select {
		case s := <-ch:
			fmt.Fprintf(os.Stderr, "\n%s: stopping cluster %s\n", s, c.Name)
			if also != nil {
				also()
			}
			_ = c.Stop()
			os.Exit(130)
		case <-done:
		}
	}()
	return func() { signal.Stop(ch); close(done) }
}

// DumpLogs passes the last lines of each component's log to logf.
func (c *Cluster) DumpLogs(logf func(string, ...any)) {
	logs, _ := filepath.Glob(filepath.Join(c.Workdir, "clusters", c.Name, "logs", "*.log"))
	for _, l := range logs {
		b, err := os.ReadFile(l)
		if err != nil {
			continue
		}
		lines := strings.Split(strings.TrimSpace(string(b)), "\n")
		if len(lines) > 30 {
			lines = lines[len(lines)-30:]
		}
		logf("--- %s (last %d lines)\n%s", filepath.Base(l), len(lines), strings.Join(lines, "\n"))
	}
}

// createLock is the file lockCreate locks.
var createLock = filepath.Join(os.TempDir(), "cairn-kwokctl-create.lock")

// lockCreate takes a lock that every process of this machine takes around
// `kwokctl create cluster`, and returns its release. kwokctl gives etcd,
// the controller manager, the scheduler and kwok ports it finds unused
// counting down from 32767, afresh in each process, and sees another
// cluster's ports only once its components listen: two clusters created at
// once (e2e packages in two lanes) took the same ports, and one of them
// never got a ready node. Created one after another, each sees the
// other's listeners (create waits until its components are ready).
func lockCreate() (func(), error) {
	f, err := os.OpenFile(createLock, os.O_CREATE|os.O_RDWR, 0o666)
	if err != nil {
		return nil, fmt.Errorf("cluster: %w", err)
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX); err != nil {
		f.Close()
		return nil, fmt.Errorf("cluster: locking %s: %w", f.Name(), err)
	}
	return func() { _ = syscall.Flock(int(f.Fd()), syscall.LOCK_UN); f.Close() }, nil
}

func (c *Cluster) kwokctl(ctx context.Context, args ...string) error {
	cmd := exec.CommandContext(ctx, filepath.Join(c.dir, "kwokctl"), args...)
	cmd.Env = append(os.Environ(), "KWOK_WORKDIR="+c.Workdir)
	out, err := cmd.CombinedOutput()
	if err != nil {
		return fmt.Errorf("cluster: kwokctl %s: %w\n%s", strings.Join(args, " "), err, out)
	}
	return nil
}

func (c *Cluster) waitNodesReady(ctx context.Context, n int) error {
	cl, err := client.New(c.Config, client.Options{})
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	for {
		nodes := &corev1.NodeList{}
		ready := 0
		if err := cl.List(ctx, nodes); err == nil {
			for _, nd := range nodes.Items {
				for _, cond := range nd.Status.Conditions {
					if cond.Type == corev1.NodeReady && cond.Status == corev1.ConditionTrue {
						ready++
					}
				}
			}
		}
		if ready >= n {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("cluster: %d of %d node(s) ready: %w", ready, n, ctx.Err())
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// Existing returns the cluster name that kwokctl keeps in workdir, e.g. to
// stop one that another process started (the demo's `down`).
func Existing(name, workdir string) (*Cluster, error) {
	dir, err := ControlPlaneDir("")
	if err != nil {
		return nil, err
	}
	return &Cluster{Name: name, Workdir: workdir, Kubeconfig: filepath.Join(workdir, "kubeconfig"), dir: dir, logf: func(string, ...any) {}}, nil
}
