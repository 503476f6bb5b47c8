package cluster

import (
	"context"
	_ "embed"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"cairn.dev/e2e/podrunner"
)

// A running cluster's components restarted, its readiness, its kwok nodes
// and the pod runner that stands for a kubelet.

// RestartComponent kills a control-plane component of the cluster (e.g.
// "kube-apiserver") with SIGKILL, as a crash would, and starts it again with
// the command line and working directory kwokctl gave it, logging to the same
// file. For kube-apiserver and etcd it returns once the API server's /readyz
// answers ok (its etcd check included). It returns how long the component
// was down (for etcd: until the API server is ready again).
func (c *Cluster) RestartComponent(ctx context.Context, component string) (time.Duration, error) {
	clusterDir := filepath.Join(c.Workdir, "clusters", c.Name)
	pidFile := filepath.Join(clusterDir, "pids", component+".pid")
	b, err := os.ReadFile(pidFile)
	if err != nil {
		return 0, fmt.Errorf("cluster: %s: %w", component, err)
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil {
		return 0, fmt.Errorf("cluster: %s: %w", pidFile, err)
	}
	raw, err := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
	if err != nil {
		return 0, fmt.Errorf("cluster: %s (pid %d) is not running: %w", component, pid, err)
	}
	argv := strings.Split(strings.TrimRight(string(raw), "\x00"), "\x00")
	cwd, err := os.Readlink(fmt.Sprintf("/proc/%d/cwd", pid))
	if err != nil {
		return 0, err
	}
	killed := time.Now()
	if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
		return 0, fmt.Errorf("cluster: killing %s: %w", component, err)
	}
	if err := waitExited(ctx, pid); err != nil {
		return 0, err
	}
	// A start can still lose the race for its port (a socket of the old
	// process the kernel has not let go of yet): one that exits before it
	// is ready is started again, a few times.
	var cmd *exec.Cmd
	for attempt := 1; ; attempt++ {
		exited := make(chan struct{})
		if cmd, err = c.startAgain(component, argv, cwd, clusterDir, exited); err != nil {
			return 0, err
		}
		if err := os.WriteFile(pidFile, []byte(strconv.Itoa(cmd.Process.Pid)), 0o644); err != nil {
			return 0, err
		}
		if component != "kube-apiserver" && component != "etcd" {
			break
		}
		err = c.waitReadyz(ctx, exited)
		if err == nil {
			break
		}
		if !errors.Is(err, errExited) || attempt == 5 {
			return 0, err
		}
		c.logf("cluster %s: %s (pid %d) exited before it was ready (attempt %d; see its log); starting it again", c.Name, component, cmd.Process.Pid, attempt)
		select {
		case <-ctx.Done():
			return 0, ctx.Err()
		case <-time.After(time.Duration(attempt) * 500 * time.Millisecond):
		}
	}
	down := time.Since(killed)
	c.logf("cluster %s: %s restarted (pid %d -> %d), down %s", c.Name, component, pid, cmd.Process.Pid, down.Round(time.Millisecond))
	return down, nil
}

// errExited: the component exited while it was waited for.
var errExited = errors.New("exited before it was ready")

// startAgain starts a component with the command line it had, its output
// appended to its log; exited is closed when it ends.
func (c *Cluster) startAgain(component string, argv []string, cwd, clusterDir string, exited chan struct{}) (*exec.Cmd, error) {
	logf, err := os.OpenFile(filepath.Join(clusterDir, "logs", component+".log"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Dir = cwd
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	if err := cmd.Start(); err != nil {
		logf.Close()
		return nil, fmt.Errorf("cluster: starting %s again: %w", component, err)
	}
	go func() { _ = cmd.Wait(); logf.Close(); close(exited) }()
	c.mu.Lock()
	c.started = append(c.started, cmd.Process)
	c.mu.Unlock()
	return cmd, nil
}

// waitExited waits until every thread of process pid has exited: a Go
// program's main thread can be a zombie while its other threads still
// hold its files — its listening sockets among them.
func waitExited(ctx context.Context, pid int) error {
	for {
		tasks, err := os.ReadDir(fmt.Sprintf("/proc/%d/task", pid))
		if err != nil {
			return nil // gone (reaped)
		}
		alive := 0
		for _, t := range tasks {
			st, err := os.ReadFile(fmt.Sprintf("/proc/%d/task/%s/stat", pid, t.Name()))
			if err == nil && !strings.Contains(string(st), ") Z ") && !strings.Contains(string(st), ") X ") {
				alive++
			}
		}
		if alive == 0 {
			return nil // a zombie: dead, waiting for its parent
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// waitReadyz waits until the API server answers /readyz "ok" (2 minutes at
// most), or the component just started exits (errExited).
func (c *Cluster) waitReadyz(ctx context.Context, exited <-chan struct{}) error {
	cs, err := kubernetes.NewForConfig(c.Config)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	for {
		body, err := cs.Discovery().RESTClient().Get().AbsPath("/readyz").DoRaw(ctx)
		if err == nil && strings.TrimSpace(string(body)) == "ok" {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("cluster: kube-apiserver not ready again: %w (last: %v)", ctx.Err(), err)
		case <-exited:
			return errExited
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// taintKwokNodes taints the kwok nodes FakeTaint: from then on the scheduler
// places every pod on the pod runner's node.
func (c *Cluster) taintKwokNodes(ctx context.Context) error {
	cl, err := client.New(c.Config, client.Options{})
	if err != nil {
		return err
	}
	nodes := &corev1.NodeList{}
	if err := cl.List(ctx, nodes); err != nil {
		return err
	}
	for i := range nodes.Items {
		n := &nodes.Items[i]
		patch := client.MergeFrom(n.DeepCopy())
		n.Spec.Taints = append(n.Spec.Taints, corev1.Taint{Key: FakeTaint, Value: "true", Effect: corev1.TaintEffectNoSchedule})
		if err := cl.Patch(ctx, n, patch); err != nil {
			return fmt.Errorf("cluster: tainting kwok node %s: %w", n.Name, err)
		}
	}
	return nil
}

// StartPodRunner starts the pod runner's node on the cluster cfg connects
// to, keeping its folders under workdir/podrunner. image is the local agent
// image (empty: $CAIRN_AGENT_IMAGE, else DefaultAgentImage).
func StartPodRunner(ctx context.Context, cfg *rest.Config, workdir, image string, logf func(string, ...any)) (*podrunner.Runner, error) {
	return startPodRunner(ctx, cfg, workdir, "", image, nil, logf)
}

// startPodRunner is StartPodRunner with the node's name (empty: the default).
func startPodRunner(ctx context.Context, cfg *rest.Config, workdir, node, image string, more map[string]string, logf func(string, ...any)) (*podrunner.Runner, error) {
	if image == "" {
		image = os.Getenv("CAIRN_AGENT_IMAGE")
	}
	if image == "" {
		image = DefaultAgentImage
	}
	images := map[string]string{AgentRepository: image}
	for repo, local := range more {
		images[repo] = local
	}
	return podrunner.Start(ctx, podrunner.Options{NodeName: node, Config: cfg, Dir: filepath.Join(workdir, "podrunner"),
		Images: images, Logf: logf})
}
