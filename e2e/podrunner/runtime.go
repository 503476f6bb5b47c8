package podrunner

import (
	"context"
	"time"

	"github.com/virtual-kubelet/virtual-kubelet/node/api"
)

// A runtime runs one container of a pod: as a Docker container (dockerRuntime)
// or, where no Docker engine is reachable, as a local process
// (processRuntime).
type runtime interface {
	// Describe says what the runtime is, for the harness's output.
	Describe() string
	// Start starts the container; the instance reports how it ends.
	Start(ctx context.Context, c containerSpec) (instance, error)
	// Cleanup removes whatever the runtime left behind for this node (e.g.
	// containers of a runner that was killed).
	Cleanup(ctx context.Context) error
	// PodNetwork is the address of the host as a container on a network of
	// its own reaches it (Docker's bridge gateway), or "" when the runtime
	// gives pods no network of their own (processes).
	PodNetwork(ctx context.Context) (string, error)
}

// An instance is one started container.
type instance interface {
	// Wait blocks until the container exited.
	Wait() exitStatus
	// Stop asks the container to stop (SIGTERM) and kills it after grace.
	Stop(grace time.Duration)
	// Kill sends SIGKILL, as a crash would.
	Kill()
	// Logs returns the container's output so far (stdout and stderr).
	Logs() string
	// Exec runs a command in the running container (`kubectl exec`).
	Exec(ctx context.Context, cmd []string, aio api.AttachIO) error
	// IP is the container's address on its own network, "" on the host's.
	IP() string
	// PID is the host's process ID of the container's main process (the
	// soak reads its resident memory from /proc).
	PID(ctx context.Context) (int, error)
}

// containerSpec is what the provider asks a runtime to run, with the pod's
// volumes already resolved to host folders.
type containerSpec struct {
	// Name is unique per pod container on this node.
	Name string
	// Image as the pod names it, and the local image it runs (after the
	// runner's image map).
	PodImage, Image string
	// Command replaces the image's entrypoint, Args its command (Kubernetes
	// semantics).
	Command, Args []string
	// Env is NAME=value, every valueFrom already resolved.
	Env        []string
	WorkingDir string
	// UID, GID run the process; nil keeps the image's user.
	UID, GID *int64
	// Groups are supplementary groups (the pod's fsGroup and supplementalGroups).
	Groups          []int64
	ReadOnlyRootfs  bool
	CapDrop, CapAdd []string
	NoNewPrivileges bool
	// Mounts of host folders and files.
	Mounts []hostMount
	// TermLogHost is the host file mounted at TermLogPath (the container's
	// terminationMessagePath).
	TermLogHost, TermLogPath string
	// termFallback: terminationMessagePolicy FallbackToLogsOnError.
	termFallback bool
	// MemoryLimit in bytes and NanoCPUs (0: none).
	MemoryLimit, NanoCPUs int64
	// Labels on the container.
	Labels map[string]string
	// OwnNetwork runs the container in a network namespace of its own
	// (Docker's default bridge) instead of the host's, with Hostname (the
	// pod's name, as the kubelet sets it).
	OwnNetwork bool
	Hostname   string
}

type hostMount struct {
	Host, Container string
	ReadOnly        bool
}

// exitStatus is how a container ended.
type exitStatus struct {
	Code int32
	// Reason as a kubelet writes it: Completed, Error, OOMKilled.
	Reason            string
	Started, Finished time.Time
	// Err is set when the runtime lost track of the container.
	Err error
}
