package podrunner

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/api/types/filters"
	"github.com/docker/docker/api/types/mount"
	"github.com/docker/docker/api/types/network"
	"github.com/docker/docker/client"
	"github.com/docker/docker/pkg/stdcopy"
	"github.com/virtual-kubelet/virtual-kubelet/errdefs"
	"github.com/virtual-kubelet/virtual-kubelet/node/api"
	utilexec "k8s.io/utils/exec"
)

// NodeLabel on every container the runner starts names its node, so Cleanup
// finds what a killed runner left behind.
const NodeLabel = "cairn.dev/pod-runner-node"

// dockerRuntime runs containers on the local Docker engine with the host's
// network (pods reach the databases and S3 the harness starts on loopback),
// or, for pods that serve ports (OwnNetwork), on Docker's default bridge:
// each such pod has its own address, as on a cluster, so two replicas listen
// on the same ports.
type dockerRuntime struct {
	cli     *client.Client
	node    string
	version string
}

// newDockerRuntime connects to the engine ($DOCKER_HOST, else the local
// socket) and negotiates the API version down to the engine's (1.41 for
// Docker 20.10). It fails when no engine answers.
func newDockerRuntime(ctx context.Context, node string) (*dockerRuntime, error) {
	cli, err := client.NewClientWithOpts(client.FromEnv, client.WithAPIVersionNegotiation())
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	if _, err := cli.Ping(ctx); err != nil {
		cli.Close()
		return nil, err
	}
	v, err := cli.ServerVersion(ctx)
	if err != nil {
		cli.Close()
		return nil, err
	}
	return &dockerRuntime{cli: cli, node: node, version: fmt.Sprintf("Docker Engine %s, API %s", v.Version, cli.ClientVersion())}, nil
}

func (d *dockerRuntime) Describe() string {
	return "Docker containers (" + d.version + ", host network; pods that declare ports on the bridge)"
}

// PodNetwork returns the gateway of Docker's default bridge: the host's
// address as its containers reach it.
func (d *dockerRuntime) PodNetwork(ctx context.Context) (string, error) {
	n, err := d.cli.NetworkInspect(ctx, "bridge", network.InspectOptions{})
	if err != nil {
		return "", fmt.Errorf("inspecting Docker's bridge network: %w", err)
	}
	for _, c := range n.IPAM.Config {
		if c.Gateway != "" {
			return c.Gateway, nil
		}
	}
	// Docker 20.10 leaves the default bridge's gateway out of its IPAM
	// configuration: it is the address of the bridge's interface (docker0).
	if ifc, err := net.InterfaceByName(n.Options["com.docker.network.bridge.name"]); err == nil {
		addrs, _ := ifc.Addrs()
		for _, a := range addrs {
			if ipn, ok := a.(*net.IPNet); ok && ipn.IP.To4() != nil {
				return ipn.IP.String(), nil
			}
		}
	}
	return "", errors.New("Docker's bridge network has no gateway address")
}

// imagePresent reports whether the engine has the image (no pull is ever made).
func (d *dockerRuntime) imagePresent(ctx context.Context, image string) error {
	_, err := d.cli.ImageInspect(ctx, image)
	return err
}

func (d *dockerRuntime) Start(ctx context.Context, c containerSpec) (instance, error) {
	cfg := &container.Config{
		Image:      c.Image,
		Env:        c.Env,
		WorkingDir: c.WorkingDir,
		Labels:     c.Labels,
	}
	if len(c.Command) > 0 {
		cfg.Entrypoint = c.Command
		cfg.Cmd = c.Args
		if cfg.Cmd == nil {
			cfg.Cmd = []string{} // not the image's CMD: Kubernetes drops it when command is set
		}
	} else if len(c.Args) > 0 {
		cfg.Cmd = c.Args
	}
	if c.UID != nil {
		cfg.User = strconv.FormatInt(*c.UID, 10)
		if c.GID != nil {
			cfg.User += ":" + strconv.FormatInt(*c.GID, 10)
		}
	}
	netMode := container.NetworkMode("host")
	if c.OwnNetwork {
		netMode = "bridge"
		cfg.Hostname = c.Hostname
	}
	host := &container.HostConfig{
		NetworkMode:    netMode,
		ReadonlyRootfs: c.ReadOnlyRootfs,
		CapDrop:        c.CapDrop,
		CapAdd:         c.CapAdd,
		Resources:      container.Resources{Memory: c.MemoryLimit, NanoCPUs: c.NanoCPUs},
	}
	if c.MemoryLimit > 0 {
		host.Resources.MemorySwap = c.MemoryLimit // no swap beyond the limit, as the kubelet
	}
	for _, g := range c.Groups {
		host.GroupAdd = append(host.GroupAdd, strconv.FormatInt(g, 10))
	}
	if c.NoNewPrivileges {
		host.SecurityOpt = append(host.SecurityOpt, "no-new-privileges")
	}
	for _, m := range c.Mounts {
		host.Mounts = append(host.Mounts, mount.Mount{Type: mount.TypeBind, Source: m.Host, Target: m.Container, ReadOnly: m.ReadOnly})
	}
	if c.TermLogHost != "" {
		host.Mounts = append(host.Mounts, mount.Mount{Type: mount.TypeBind, Source: c.TermLogHost, Target: c.TermLogPath})
	}
	created, err := d.cli.ContainerCreate(ctx, cfg, host, nil, nil, c.Name)
	if err != nil {
		return nil, err
	}
	inst := &dockerInstance{d: d, id: created.ID, done: make(chan struct{})}
	// Wait before start, so a container that ends at once is not missed.
	waitCh, errCh := d.cli.ContainerWait(context.Background(), created.ID, container.WaitConditionNextExit)
	if err := d.cli.ContainerStart(ctx, created.ID, container.StartOptions{}); err != nil {
		_ = d.cli.ContainerRemove(context.Background(), created.ID, container.RemoveOptions{Force: true})
		return nil, err
	}
	if c.OwnNetwork {
		info, err := d.cli.ContainerInspect(ctx, created.ID)
		if err == nil && info.NetworkSettings != nil {
			if n, ok := info.NetworkSettings.Networks["bridge"]; ok {
				inst.ip = n.IPAddress
			}
		}
		if inst.ip == "" {
			_ = d.cli.ContainerRemove(context.Background(), created.ID, container.RemoveOptions{Force: true})
			return nil, fmt.Errorf("container %s has no address on Docker's bridge (%v)", c.Name, err)
		}
	}
	go inst.wait(waitCh, errCh)
	return inst, nil
}

func (d *dockerRuntime) Cleanup(ctx context.Context) error {
	list, err := d.cli.ContainerList(ctx, container.ListOptions{All: true, Filters: filters.NewArgs(filters.Arg("label", NodeLabel+"="+d.node))})
	if err != nil {
		return err
	}
	var errs []string
	for _, c := range list {
		if err := d.cli.ContainerRemove(ctx, c.ID, container.RemoveOptions{Force: true}); err != nil {
			errs = append(errs, err.Error())
		}
	}
	if len(errs) > 0 {
		return fmt.Errorf("removing containers: %s", strings.Join(errs, "; "))
	}
	return nil
}

type dockerInstance struct {
	d    *dockerRuntime
	id   string
	ip   string
	done chan struct{}

	mu   sync.Mutex
	exit exitStatus
	logs string
}

func (i *dockerInstance) wait(waitCh <-chan container.WaitResponse, errCh <-chan error) {
	defer close(i.done)
	var waitErr error
	select {
	case <-waitCh:
	case waitErr = <-errCh:
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	st := exitStatus{Err: waitErr}
	if info, err := i.d.cli.ContainerInspect(ctx, i.id); err == nil && info.State != nil {
		st.Code = int32(info.State.ExitCode)
		st.Started, _ = time.Parse(time.RFC3339Nano, info.State.StartedAt)
		st.Finished, _ = time.Parse(time.RFC3339Nano, info.State.FinishedAt)
		st.Err = nil
		switch {
		case info.State.OOMKilled:
			st.Reason = "OOMKilled"
		case st.Code == 0:
			st.Reason = "Completed"
		default:
			st.Reason = "Error"
		}
	} else if st.Err == nil {
		st.Err = err
	}
	logs := i.readLogs(ctx)
	// The container is gone once it ended; its logs and termination message
	// are kept by the provider.
	_ = i.d.cli.ContainerRemove(ctx, i.id, container.RemoveOptions{Force: true})
	i.mu.Lock()
	i.exit, i.logs = st, logs
	i.mu.Unlock()
}

func (i *dockerInstance) readLogs(ctx context.Context) string {
	rc, err := i.d.cli.ContainerLogs(ctx, i.id, container.LogsOptions{ShowStdout: true, ShowStderr: true})
	if err != nil {
		return ""
	}
	defer rc.Close()
	var out bytes.Buffer
	_, _ = stdcopy.StdCopy(&out, &out, rc)
	return out.String()
}

func (i *dockerInstance) IP() string { return i.ip }

func (i *dockerInstance) PID(ctx context.Context) (int, error) {
	info, err := i.d.cli.ContainerInspect(ctx, i.id)
	if err != nil {
		return 0, err
	}
	if info.State == nil || !info.State.Running || info.State.Pid == 0 {
		return 0, fmt.Errorf("container %s is not running", i.id)
	}
	return info.State.Pid, nil
}

func (i *dockerInstance) Kill() {
	_ = i.d.cli.ContainerKill(context.Background(), i.id, "KILL")
}

func (i *dockerInstance) Wait() exitStatus {
	<-i.done
	i.mu.Lock()
	defer i.mu.Unlock()
	return i.exit
}

func (i *dockerInstance) Stop(grace time.Duration) {
	secs := int(grace / time.Second)
	_ = i.d.cli.ContainerStop(context.Background(), i.id, container.StopOptions{Timeout: &secs})
}

func (i *dockerInstance) Logs() string {
	select {
	case <-i.done:
		i.mu.Lock()
		defer i.mu.Unlock()
		return i.logs
	default:
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	return i.readLogs(ctx)
}

// Exec runs cmd in the container as docker exec does (the container's user,
// environment and working directory) and streams its input and output.
func (i *dockerInstance) Exec(ctx context.Context, cmd []string, aio api.AttachIO) error {
	select {
	case <-i.done:
		return errdefs.InvalidInput("the container has exited")
	default:
	}
	stdin, stdout, stderr := aio.Stdin(), aio.Stdout(), aio.Stderr()
	ex, err := i.d.cli.ContainerExecCreate(ctx, i.id, container.ExecOptions{Cmd: cmd, Tty: aio.TTY(),
		AttachStdin: stdin != nil, AttachStdout: stdout != nil, AttachStderr: stderr != nil})
	if err != nil {
		return err
	}
	resp, err := i.d.cli.ContainerExecAttach(ctx, ex.ID, container.ExecAttachOptions{Tty: aio.TTY()})
	if err != nil {
		return err
	}
	defer resp.Close()
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	if stdin != nil {
		go func() {
			_, _ = io.Copy(resp.Conn, stdin)
			_ = resp.CloseWrite()
		}()
	}
	if aio.TTY() {
		go func() {
			for {
				select {
				case size := <-aio.Resize():
					_ = i.d.cli.ContainerExecResize(ctx, ex.ID, container.ResizeOptions{Height: uint(size.Height), Width: uint(size.Width)})
				case <-ctx.Done():
					return
				}
			}
		}()
	}
	orDiscard := func(w io.Writer) io.Writer {
		if w == nil {
			return io.Discard
		}
		return w
	}
	if aio.TTY() {
		_, err = io.Copy(orDiscard(stdout), resp.Reader)
	} else {
		_, err = stdcopy.StdCopy(orDiscard(stdout), orDiscard(stderr), resp.Reader)
	}
	if err != nil {
		return err
	}
	insp, err := i.d.cli.ContainerExecInspect(ctx, ex.ID)
	if err != nil {
		return err
	}
	if insp.ExitCode != 0 {
		return utilexec.CodeExitError{Err: fmt.Errorf("command terminated with exit code %d", insp.ExitCode), Code: insp.ExitCode}
	}
	return nil
}
