package testenv

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strconv"
	"time"
)

// AgentImagesHint says how to build the agent images of the matrix.
const AgentImagesHint = "build the agent images with `make images` (cairn.local/agent:dev) and `make agent-images` (cairn.local/agent:dev-pg17, dev-pg18; hack/images/agents.sh)"

// AgentImage runs the agent of an agent image as a container, the way a
// Job's pod runs it: its own user (65532), a read-only root filesystem with
// a tmpfs /tmp, the host network (the test servers listen on 127.0.0.1),
// configured by environment only. Dirs are bind-mounted at their own path
// (a PVC store's folder) and made writable for the agent's user.
type AgentImage struct {
	Image string
	Dirs  []string
	// Dir holds termination logs (a new temporary folder when empty).
	Dir string
}

// Run runs the agent with env (KEY=value) and args, at most 10 minutes.
func (a *AgentImage) Run(env []string, args ...string) Run {
	r := Run{Args: args, Code: -1, PeakRSSKiB: -1}
	if err := RequireImage(a.Image, AgentImagesHint); err != nil {
		r.Stderr = err.Error()
		return r
	}
	dir := a.Dir
	if dir == "" {
		var err error
		if dir, err = os.MkdirTemp("", "cairn-agent-image-"); err != nil {
			r.Stderr = err.Error()
			return r
		}
		defer os.RemoveAll(dir)
	}
	tl := filepath.Join(dir, "termination-log-"+strconv.FormatInt(time.Now().UnixNano(), 36))
	if err := os.WriteFile(tl, nil, 0o666); err != nil {
		r.Stderr = err.Error()
		return r
	}
	defer os.Remove(tl)
	os.Chmod(tl, 0o666)
	dargs := []string{"run", "--rm", "--network", "host", "--user", "65532:65532", "--read-only",
		"--tmpfs", "/tmp:rw,exec,size=2g", "--label", ContainerLabel + "=1",
		"--label", ContainerPIDLabel + "=" + strconv.Itoa(os.Getpid()),
		"-v", tl + ":" + tl, "-e", "CAIRN_TERMINATION_LOG=" + tl}
	for _, d := range a.Dirs {
		os.Chmod(d, 0o777)
		dargs = append(dargs, "-v", d+":"+d)
	}
	for _, e := range env {
		dargs = append(dargs, "-e", e)
	}
	dargs = append(append(dargs, a.Image), args...)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	cmd := dockerCmd(ctx, dargs...)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	start := time.Now()
	err := cmd.Run()
	r.Elapsed = time.Since(start)
	r.ended(err, out.String(), errb.String(), tl)
	return r
}

// ListFiles lists the regular files under dir, relative to it.
func ListFiles(dir string) ([]string, error) {
	var out []string
	err := filepath.WalkDir(dir, func(p string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.Type().IsRegular() {
			rel, _ := filepath.Rel(dir, p)
			out = append(out, rel)
		}
		return nil
	})
	return out, err
}

// Start runs a long-running agent command (agent archive) detached, as
// Run does otherwise; Remove the container to stop it.
func (a *AgentImage) Start(env []string, args ...string) (*Container, error) {
	flags := []string{"--user", "65532:65532", "--read-only", "--tmpfs", "/tmp:rw,exec,size=2g"}
	for _, d := range a.Dirs {
		os.Chmod(d, 0o777)
		flags = append(flags, "-v", d+":"+d)
	}
	return startContainer(a.Image, "agent", flags, env, args...)
}
