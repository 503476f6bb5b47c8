// Package podrunner is the local plane's kubelet for real pods: a node whose
// pods run as real containers on the local Docker engine, written as a
// virtual-kubelet provider (virtual-kubelet's node package registers the
// node, keeps its lease, resolves env from Secrets and ConfigMaps and syncs
// pod status; this package only runs the containers).
//
// A pod's image goes through an image map (the platform's
// ghcr.io/cairn-dev/agent:<tag> runs the image `make images` builds,
// cairn.local/agent:dev), its command and args, env, volumes (emptyDir per
// pod, a host folder per PersistentVolume its claims mount, hostPath), security context
// (user and groups, fsGroup, read-only root filesystem, dropped
// capabilities, no-new-privileges) and memory and CPU limits are mapped to
// the container, which uses the host's network so pods reach the databases
// and S3 server the harness starts on loopback. The exit code becomes the
// container's terminated state and the termination-message file its
// message; phase and conditions are written back; deleting a pod stops its
// container with the grace period.
//
// Where no Docker engine answers, the same pods run as local processes of
// the agent binary (see processRuntime; the runner says so when it starts).
package podrunner

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	"github.com/virtual-kubelet/virtual-kubelet/node"
	"github.com/virtual-kubelet/virtual-kubelet/node/nodeutil"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
)

// Label is set to "true" on the runner's node.
const Label = "cairn.dev/pod-runner"

// Runtimes.
const (
	RuntimeDocker  = "docker"
	RuntimeProcess = "process"
)

// DefaultNodeName of the runner's node.
const DefaultNodeName = "cairn-pods"

// Options of a pod runner.
type Options struct {
	// NodeName of the node (default DefaultNodeName).
	NodeName string
	// Config connects to the cluster (as the node: admin in the harness).
	Config *rest.Config
	// Dir holds the pods' host folders and the claims' folders.
	Dir string
	// Images maps an image repository (the pod's image without tag or
	// digest) to the local image run for it.
	Images map[string]string
	// Runtime is RuntimeDocker, RuntimeProcess, or empty: Docker when an
	// engine answers, else processes.
	Runtime string
	// AgentBinary is the host binary process mode runs for the agent image
	// (built from the repository's agent/ folder when empty).
	AgentBinary string
	// Logf receives progress lines; nil discards them.
	Logf func(format string, args ...any)
}

// Runner is a running pod-runner node.
type Runner struct {
	// NodeName of its node.
	NodeName string
	// Runtime says how pods run (printed by the harness).
	Runtime string

	p      *provider
	rt     runtime
	cancel context.CancelFunc
	node   *nodeutil.Node
}

// Start registers the node, waits until it is Ready and returns the runner.
func Start(ctx context.Context, o Options) (*Runner, error) {
	if o.NodeName == "" {
		o.NodeName = DefaultNodeName
	}
	if o.Logf == nil {
		o.Logf = func(string, ...any) {}
	}
	if o.Dir == "" {
		return nil, errors.New("podrunner: Options.Dir is required")
	}
	rt, err := newRuntime(ctx, o)
	if err != nil {
		return nil, err
	}
	if err := rt.Cleanup(ctx); err != nil {
		return nil, fmt.Errorf("podrunner: %w", err)
	}
	cs, err := kubernetes.NewForConfig(o.Config)
	if err != nil {
		return nil, err
	}
	apiURL, err := url.Parse(o.Config.Host)
	if err != nil {
		return nil, fmt.Errorf("podrunner: the API server's address %q: %w", o.Config.Host, err)
	}
	apiPort := apiURL.Port()
	if apiPort == "" {
		apiPort = "443"
	}
	p := &provider{node: o.NodeName, rt: rt, dir: o.Dir, logf: o.Logf, hostIP: "127.0.0.1", apiPort: apiPort, pods: map[string]*podState{}, cs: cs,
		image: func(img string) string {
			if local, ok := o.Images[repository(img)]; ok {
				return local
			}
			return img
		}}
	api, err := kubeletAPI(o.NodeName)
	if err != nil {
		return nil, fmt.Errorf("podrunner: %w", err)
	}
	n, err := nodeutil.NewNode(o.NodeName,
		func(nodeutil.ProviderConfig) (nodeutil.Provider, node.NodeProvider, error) { return p, nil, nil },
		nodeutil.WithClient(cs),
		func(cfg *nodeutil.NodeConfig) error {
			cfg.NumWorkers = 4
			nodeSpec(&cfg.NodeSpec)
			return nil
		},
		api)
	if err != nil {
		return nil, fmt.Errorf("podrunner: %w", err)
	}
	runCtx, cancel := context.WithCancel(context.Background())
	go func() { _ = n.Run(runCtx) }()
	if err := n.WaitReady(ctx, time.Minute); err != nil {
		cancel()
		return nil, fmt.Errorf("podrunner: node %s not ready: %w", o.NodeName, err)
	}
	r := &Runner{NodeName: o.NodeName, Runtime: rt.Describe(), p: p, rt: rt, cancel: cancel, node: n}
	o.Logf("pod runner: node %s runs pods as %s", o.NodeName, r.Runtime)
	for repo, local := range o.Images {
		o.Logf("pod runner: image %s:* runs %s", repo, local)
	}
	return r, nil
}

func newRuntime(ctx context.Context, o Options) (runtime, error) {
	if o.Runtime == "" || o.Runtime == RuntimeDocker {
		d, err := newDockerRuntime(ctx, o.NodeName)
		switch {
		case err == nil:
			for _, local := range o.Images {
				if err := d.imagePresent(ctx, local); err != nil {
					return nil, fmt.Errorf("podrunner: image %s is not on the Docker engine: run `make images` (%v)", local, err)
				}
			}
			return d, nil
		case o.Runtime == RuntimeDocker:
			return nil, fmt.Errorf("podrunner: no Docker engine answers: %w", err)
		default:
			o.Logf("pod runner: no Docker engine answers (%v): running pods as local processes", err)
		}
	}
	bin := o.AgentBinary
	if bin == "" {
		var err error
		if bin, err = buildAgent(ctx, o.Dir); err != nil {
			return nil, err
		}
	}
	entry := map[string]string{}
	for _, local := range o.Images {
		if strings.Contains(local, "agent") {
			entry[local] = bin
		}
	}
	return &processRuntime{entrypoints: entry}, nil
}

// buildAgent builds the agent from the repository's agent/ folder.
func buildAgent(ctx context.Context, dir string) (string, error) {
	wd, err := os.Getwd()
	if err != nil {
		return "", err
	}
	root := wd
	for {
		if _, err := os.Stat(filepath.Join(root, "go.work")); err == nil {
			break
		}
		if filepath.Dir(root) == root {
			return "", errors.New("podrunner: no go.work above the working directory to build the agent from")
		}
		root = filepath.Dir(root)
	}
	bin := filepath.Join(dir, "bin", "agent")
	// CGO off and -trimpath as `make images`: the same compiled packages.
	cmd := exec.CommandContext(ctx, "go", "build", "-trimpath", "-o", bin, ".")
	cmd.Dir = filepath.Join(root, "agent")
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("podrunner: building the agent: %w\n%s", err, out)
	}
	if err := os.Chmod(filepath.Dir(bin), 0o755); err != nil {
		return "", err
	}
	return bin, nil
}

// nodeSpec fills in what the scheduler needs of the node.
func nodeSpec(n *corev1.Node) {
	n.Labels[Label] = "true"
	n.Labels["type"] = "pod-runner"
	n.Labels[corev1.LabelOSStable] = "linux"
	n.Labels[corev1.LabelArchStable] = "amd64"
	res := corev1.ResourceList{
		corev1.ResourceCPU:    resource.MustParse("8"),
		corev1.ResourceMemory: resource.MustParse("16Gi"),
		corev1.ResourcePods:   resource.MustParse("110"),
	}
	n.Status.Capacity, n.Status.Allocatable = res, res.DeepCopy()
	// Only an InternalIP: the API server tries a Hostname address first when
	// it connects to the kubelet API (logs), and the node's name resolves to
	// nothing.
	n.Status.Addresses = []corev1.NodeAddress{{Type: corev1.NodeInternalIP, Address: "127.0.0.1"}}
	n.Status.NodeInfo = corev1.NodeSystemInfo{OperatingSystem: "linux", Architecture: "amd64", KubeletVersion: "v1.37.2-cairn-pod-runner",
		ContainerRuntimeVersion: "docker://20.10"}
}

// repository strips a tag or digest from an image reference.
func repository(image string) string {
	if i := strings.Index(image, "@"); i >= 0 {
		image = image[:i]
	}
	if i := strings.LastIndex(image, ":"); i > strings.LastIndex(image, "/") {
		image = image[:i]
	}
	return image
}

// ClaimDir is the host folder backing a PersistentVolumeClaim (its
// volume's, when it is bound to one).
func (r *Runner) ClaimDir(namespace, claim string) string {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	return r.p.claimDir(ctx, namespace, claim)
}

// VolumeDir is the host folder backing a PersistentVolume: what every
// claim bound to it mounts.
func (r *Runner) VolumeDir(volume string) string { return r.p.volumeDir(volume) }

// Logs returns a pod container's output, while the runner knows the pod.
func (r *Runner) Logs(namespace, pod, container string) string {
	return r.p.Logs(namespace, pod, container)
}

// Kill SIGKILLs a running container of a pod, as a crash would. The pod then
// ends (the runner does not restart a container in place): its controller
// replaces it.
func (r *Runner) Kill(namespace, pod, container string) error {
	r.p.mu.Lock()
	var inst instance
	if st, ok := r.p.pods[key(namespace, pod)]; ok {
		inst = st.running[container]
	}
	r.p.mu.Unlock()
	if inst == nil {
		return fmt.Errorf("podrunner: container %s of pod %s/%s is not running", container, namespace, pod)
	}
	inst.Kill()
	return nil
}

// PID returns the host's process ID of a running container of a pod (its
// main process).
func (r *Runner) PID(ctx context.Context, namespace, pod, container string) (int, error) {
	r.p.mu.Lock()
	var inst instance
	if st, ok := r.p.pods[key(namespace, pod)]; ok {
		inst = st.running[container]
	}
	r.p.mu.Unlock()
	if inst == nil {
		return 0, fmt.Errorf("podrunner: container %s of pod %s/%s is not running", container, namespace, pod)
	}
	return inst.PID(ctx)
}

// Stop stops the node's controllers, then every pod it still runs
// (SIGTERM, 10 s grace), and removes what is left of its containers.
func (r *Runner) Stop() error {
	r.cancel()
	<-r.node.Done()
	r.p.mu.Lock()
	var running []instance
	for _, st := range r.p.pods {
		for _, i := range st.running {
			running = append(running, i)
		}
	}
	r.p.mu.Unlock()
	for _, i := range running {
		i.Stop(10 * time.Second)
		i.Wait()
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	return r.rt.Cleanup(ctx)
}
