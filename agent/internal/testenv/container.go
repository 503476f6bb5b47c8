package testenv

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
)

// Database servers of other versions than the host's run as containers of
// images built here from Debian packages (hack/images/servers.sh, `make
// db-images`): host network, bound to 127.0.0.1 on a free port, the data
// in the container (gone with it). Every container carries the labels
// ContainerLabel=1 and ContainerPIDLabel=<the test process's pid>: Stop
// removes it (docker rm -f), and every start first removes the labelled
// containers of test processes that no longer run (the parent-death
// signal a container cannot have). `make db-clean` removes them all.
const (
	ContainerLabel    = "dev.cairn.test"
	ContainerPIDLabel = "dev.cairn.test.pid"
	// ImagesHint says how to build the server images.
	ImagesHint = "build the database server images with `make db-images` (hack/images/servers.sh, as root)"
)

// Docker is the docker command the test environment runs.
var Docker = "docker"

// Container is one running container.
type Container struct {
	Name  string
	Image string
}

var sweepOnce sync.Once

// dockerCmd runs docker with the engine's API pinned as hack/images does.
func dockerCmd(ctx context.Context, args ...string) *exec.Cmd {
	cmd := exec.CommandContext(ctx, Docker, args...)
	cmd.Env = append(os.Environ(), "DOCKER_API_VERSION=1.41")
	return cmd
}

func dockerOut(ctx context.Context, stdin string, args ...string) (string, error) {
	cmd := dockerCmd(ctx, args...)
	if stdin != "" {
		cmd.Stdin = strings.NewReader(stdin)
	}
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	if err := cmd.Run(); err != nil {
		return out.String(), fmt.Errorf("docker %s: %w: %s", args[0], err, strings.TrimSpace(errb.String()))
	}
	return out.String(), nil
}

// RequireImage fails with how to build image when the engine does not
// have it.
func RequireImage(image, hint string) error {
	if _, err := exec.LookPath(Docker); err != nil {
		return fmt.Errorf("%s not found: the version-matrix tests run database servers and agent images as containers (install Docker Engine)", Docker)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if _, err := dockerOut(ctx, "", "image", "inspect", "--format", "{{.Id}}", image); err != nil {
		return fmt.Errorf("image %s not found on the Docker engine: %s (%v)", image, hint, err)
	}
	return nil
}

// SweepContainers removes the labelled containers of test processes that
// no longer run.
func SweepContainers() {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	out, err := dockerOut(ctx, "", "ps", "-a", "--filter", "label="+ContainerLabel,
		"--format", `{{.ID}} {{.Label "`+ContainerPIDLabel+`"}}`)
	if err != nil {
		return
	}
	for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
		id, pid, _ := strings.Cut(line, " ")
		if id == "" {
			continue
		}
		if n, err := strconv.Atoi(pid); err == nil && n > 0 && processAlive(n) {
			continue
		}
		_, _ = dockerOut(ctx, "", "rm", "-f", "-v", id)
	}
}

func processAlive(pid int) bool {
	err := syscall.Kill(pid, 0)
	return err == nil || errors.Is(err, syscall.EPERM)
}

// StartContainer runs image detached on the host network as a container
// named cairn-test-prefix-<pid>-<random>, labelled for cleanup, with env
// and the command cmd.
func StartContainer(image, prefix string, env []string, cmd ...string) (*Container, error) {
	return startContainer(image, prefix, []string{"--shm-size", "256m"}, env, cmd...)
}

// startContainer is StartContainer with extra docker run flags.
func startContainer(image, prefix string, flags, env []string, cmd ...string) (*Container, error) {
	sweepOnce.Do(SweepContainers)
	if err := RequireImage(image, ImagesHint); err != nil {
		return nil, err
	}
	b := make([]byte, 4)
	rand.Read(b)
	name := "cairn-test-" + prefix + "-" + strconv.Itoa(os.Getpid()) + "-" + hex.EncodeToString(b)
	args := []string{"run", "-d", "--name", name, "--network", "host",
		"--label", ContainerLabel + "=1", "--label", ContainerPIDLabel + "=" + strconv.Itoa(os.Getpid())}
	args = append(args, flags...)
	for _, e := range env {
		args = append(args, "-e", e)
	}
	args = append(append(args, image), cmd...)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	if _, err := dockerOut(ctx, "", args...); err != nil {
		// A container created but not started is removed too.
		_, _ = dockerOut(context.Background(), "", "rm", "-f", "-v", name)
		return nil, err
	}
	return &Container{Name: name, Image: image}, nil
}

// Remove removes the container and its volumes (docker rm -f -v).
func (c *Container) Remove() {
	if c == nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	_, _ = dockerOut(ctx, "", "rm", "-f", "-v", c.Name)
}

// Running returns nil while the container runs, else an error with the
// end of its log.
func (c *Container) Running() error {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	out, err := dockerOut(ctx, "", "inspect", "--format", "{{.State.Running}} {{.State.ExitCode}}", c.Name)
	if err != nil {
		return err
	}
	if strings.HasPrefix(out, "true") {
		return nil
	}
	return fmt.Errorf("container %s (%s) stopped (%s); log:\n%s", c.Name, c.Image, strings.TrimSpace(out), c.Logs(3000))
}

// Logs returns the last n bytes of the container's output.
func (c *Container) Logs(n int) string {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cmd := dockerCmd(ctx, "logs", "--tail", "200", c.Name)
	out, _ := cmd.CombinedOutput()
	if len(out) > n {
		out = out[len(out)-n:]
	}
	return string(out)
}

// Exec runs args in the container with stdin and returns stdout; the
// error carries stderr.
func (c *Container) Exec(ctx context.Context, stdin string, args ...string) (string, error) {
	return dockerOut(ctx, stdin, append([]string{"exec", "-i", c.Name}, args...)...)
}

// waitReady polls ready (and that the container still runs) for up to
// timeout.
func (c *Container) waitReady(timeout time.Duration, ready func() error) error {
	var stopped error
	err := Poll(timeout, 200*time.Millisecond, func() error {
		if stopped = c.Running(); stopped != nil {
			return nil
		}
		return ready()
	})
	if stopped != nil {
		return stopped
	}
	if err != nil {
		return fmt.Errorf("%s in container %s: %w; log:\n%s", c.Image, c.Name, err, c.Logs(2000))
	}
	return nil
}
