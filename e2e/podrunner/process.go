package podrunner

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/virtual-kubelet/virtual-kubelet/errdefs"
	"github.com/virtual-kubelet/virtual-kubelet/node/api"
)

// processRuntime runs a pod's container as a local process, for machines
// without a Docker engine: the image's entrypoint is mapped to a host binary
// (the agent image to the agent binary built from agent/), the container's
// mount paths in its environment to their host folders, and the termination
// message to CAIRN_TERMINATION_LOG. What it cannot give: the pod's user (the
// process runs as the runner's: its folders need not be open to others), a
// read-only root filesystem, dropped capabilities and the image's own tools
// (the host's pg_dump and mysqldump are used).
type processRuntime struct {
	// entrypoints maps a local image to the host binary run for it.
	entrypoints map[string]string
}

func (p *processRuntime) Describe() string {
	var m []string
	for img, bin := range p.entrypoints {
		m = append(m, img+" → "+bin)
	}
	return "local processes (" + strings.Join(m, ", ") + "; the runner's user, no read-only root filesystem or dropped capabilities)"
}

func (p *processRuntime) Cleanup(context.Context) error { return nil }

// PodNetwork: processes share the host's network.
func (p *processRuntime) PodNetwork(context.Context) (string, error) { return "", nil }

func (p *processRuntime) Start(_ context.Context, c containerSpec) (instance, error) {
	bin, ok := p.entrypoints[c.Image]
	if !ok {
		return nil, fmt.Errorf("no local binary for image %s (process mode runs only %v)", c.Image, keys(p.entrypoints))
	}
	argv := c.Args
	if len(c.Command) > 0 {
		// The command's first word is the image's binary path; the rest are arguments.
		argv = append(append([]string{}, c.Command[1:]...), c.Args...)
	}
	env := make([]string, 0, len(c.Env)+3)
	for _, kv := range c.Env {
		env = append(env, hostPaths(kv, c.Mounts))
	}
	env = append(env, "PATH="+os.Getenv("PATH"), "CAIRN_TERMINATION_LOG="+c.TermLogHost)
	for _, m := range c.Mounts {
		if m.Container == "/tmp" {
			env = append(env, "TMPDIR="+m.Host, "HOME="+m.Host)
		}
	}
	cmd := exec.Command(bin, argv...)
	cmd.Env = env
	cmd.Dir = os.TempDir()
	inst := &processInstance{cmd: cmd, done: make(chan struct{})}
	cmd.Stdout, cmd.Stderr = &inst.out, &inst.out
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	inst.started = time.Now()
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	go inst.wait()
	return inst, nil
}

// hostPaths rewrites NAME=value when value is a mount's container path or
// below it.
func hostPaths(kv string, mounts []hostMount) string {
	name, value, _ := strings.Cut(kv, "=")
	for _, m := range mounts {
		if value == m.Container || strings.HasPrefix(value, m.Container+"/") {
			return name + "=" + m.Host + strings.TrimPrefix(value, m.Container)
		}
	}
	return kv
}

func keys(m map[string]string) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	return out
}

type processInstance struct {
	cmd     *exec.Cmd
	started time.Time
	done    chan struct{}
	exit    exitStatus

	out lockedBuffer
}

func (i *processInstance) wait() {
	err := i.cmd.Wait()
	st := exitStatus{Started: i.started, Finished: time.Now(), Reason: "Completed"}
	if err != nil {
		st.Reason = "Error"
		st.Code = 1
		if ee, ok := err.(*exec.ExitError); ok {
			if ws, ok := ee.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
				st.Code = 128 + int32(ws.Signal())
			} else {
				st.Code = int32(ee.ExitCode())
			}
		}
	}
	i.exit = st
	close(i.done)
}

func (i *processInstance) Wait() exitStatus { <-i.done; return i.exit }

func (i *processInstance) Stop(grace time.Duration) {
	pgid := -i.cmd.Process.Pid
	_ = syscall.Kill(pgid, syscall.SIGTERM)
	select {
	case <-i.done:
	case <-time.After(grace):
		_ = syscall.Kill(pgid, syscall.SIGKILL)
		<-i.done
	}
}

func (i *processInstance) Logs() string { return i.out.String() }

func (i *processInstance) IP() string { return "" }

func (i *processInstance) PID(context.Context) (int, error) { return i.cmd.Process.Pid, nil }

func (i *processInstance) Kill() { _ = syscall.Kill(-i.cmd.Process.Pid, syscall.SIGKILL) }

func (i *processInstance) Exec(context.Context, []string, api.AttachIO) error {
	return errdefs.InvalidInput("exec is not supported when pods run as local processes")
}

// lockedBuffer is a bytes.Buffer safe for the process's writes and our reads.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}
