package podrunner

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"

	corev1 "k8s.io/api/core/v1"
)

// preparedContainer is one container's runtime spec.
type preparedContainer struct {
	name string
	spec containerSpec
}

// prepare maps the pod to runtime specs: its volumes to host folders (an
// emptyDir per pod, a PersistentVolumeClaim per claim and namespace, kept
// across pods like a real volume; hostPath as is), the termination message
// to a host file, and the security context.
func (p *provider) prepare(st *podState) ([]preparedContainer, error) {
	pod := st.pod
	if len(pod.Spec.InitContainers) > 0 {
		return nil, errors.New("init containers are not supported by the pod runner")
	}
	if err := os.MkdirAll(st.dir, 0o755); err != nil {
		return nil, err
	}
	psc := pod.Spec.SecurityContext
	if psc == nil {
		psc = &corev1.PodSecurityContext{}
	}
	volumes := map[string]string{}
	for _, v := range pod.Spec.Volumes {
		var dir string
		switch {
		case v.EmptyDir != nil:
			dir = filepath.Join(st.dir, "volumes", v.Name)
		case v.PersistentVolumeClaim != nil:
			dir = p.ClaimDir(pod.Namespace, v.PersistentVolumeClaim.ClaimName)
		case v.HostPath != nil:
			volumes[v.Name] = v.HostPath.Path
			continue
		default:
			return nil, fmt.Errorf("volume %s: only emptyDir, persistentVolumeClaim and hostPath volumes are supported by the pod runner", v.Name)
		}
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return nil, err
		}
		// As the kubelet does for fsGroup: the group owns the volume and
		// new files inherit it (setgid); without fsGroup anyone may write,
		// as in an emptyDir.
		mode := os.FileMode(0o777)
		if g := psc.FSGroup; g != nil {
			if err := os.Chown(dir, -1, int(*g)); err != nil {
				return nil, err
			}
			mode = 0o775 | os.ModeSetgid
		}
		if err := os.Chmod(dir, mode); err != nil {
			return nil, err
		}
		volumes[v.Name] = dir
	}
	var out []preparedContainer
	for _, c := range pod.Spec.Containers {
		cs := containerSpec{
			Name:       fmt.Sprintf("cairn-%s-%s-%s-%s", p.node, pod.Namespace, pod.Name, c.Name),
			PodImage:   c.Image,
			Image:      p.image(c.Image),
			Command:    c.Command,
			Args:       c.Args,
			WorkingDir: c.WorkingDir,
			UID:        psc.RunAsUser,
			GID:        psc.RunAsGroup,
			Labels: map[string]string{NodeLabel: p.node, "io.kubernetes.pod.namespace": pod.Namespace,
				"io.kubernetes.pod.name": pod.Name, "io.kubernetes.pod.uid": string(pod.UID), "io.kubernetes.container.name": c.Name},
		}
		if len(cs.Name) > 200 {
			cs.Name = cs.Name[:200]
		}
		for _, e := range c.Env {
			cs.Env = append(cs.Env, e.Name+"="+e.Value) // valueFrom resolved by virtual-kubelet
		}
		if psc.FSGroup != nil {
			cs.Groups = append(cs.Groups, *psc.FSGroup)
		}
		cs.Groups = append(cs.Groups, psc.SupplementalGroups...)
		if sc := c.SecurityContext; sc != nil {
			if sc.RunAsUser != nil {
				cs.UID = sc.RunAsUser
			}
			if sc.RunAsGroup != nil {
				cs.GID = sc.RunAsGroup
			}
			cs.ReadOnlyRootfs = sc.ReadOnlyRootFilesystem != nil && *sc.ReadOnlyRootFilesystem
			cs.NoNewPrivileges = sc.AllowPrivilegeEscalation != nil && !*sc.AllowPrivilegeEscalation
			if sc.Privileged != nil && *sc.Privileged {
				return nil, fmt.Errorf("container %s: privileged containers are not supported by the pod runner", c.Name)
			}
			if caps := sc.Capabilities; caps != nil {
				for _, d := range caps.Drop {
					cs.CapDrop = append(cs.CapDrop, string(d))
				}
				for _, a := range caps.Add {
					cs.CapAdd = append(cs.CapAdd, string(a))
				}
			}
		}
		if nonRoot := runAsNonRoot(psc, c.SecurityContext); nonRoot && (cs.UID == nil || *cs.UID == 0) {
			return nil, fmt.Errorf("container %s: runAsNonRoot is set but the container would run as root (give runAsUser)", c.Name)
		}
		if m := c.Resources.Limits.Memory(); m != nil && !m.IsZero() {
			cs.MemoryLimit = m.Value()
		}
		if cpu := c.Resources.Limits.Cpu(); cpu != nil && !cpu.IsZero() {
			cs.NanoCPUs = cpu.MilliValue() * 1e6
		}
		for _, vm := range c.VolumeMounts {
			host, ok := volumes[vm.Name]
			if !ok {
				return nil, fmt.Errorf("container %s: volume mount %s names no volume", c.Name, vm.Name)
			}
			if vm.SubPath != "" {
				parent := host
				host = filepath.Join(host, filepath.Clean("/"+vm.SubPath))
				if err := mkdirLike(host, parent); err != nil {
					return nil, err
				}
			}
			cs.Mounts = append(cs.Mounts, hostMount{Host: host, Container: vm.MountPath, ReadOnly: vm.ReadOnly})
		}
		cs.TermLogPath = c.TerminationMessagePath
		if cs.TermLogPath == "" {
			cs.TermLogPath = corev1.TerminationMessagePathDefault
		}
		cs.termFallback = c.TerminationMessagePolicy == corev1.TerminationMessageFallbackToLogsOnError
		cs.TermLogHost = filepath.Join(st.dir, c.Name+"-termination-log")
		if err := os.WriteFile(cs.TermLogHost, nil, 0o666); err != nil {
			return nil, err
		}
		if err := os.Chmod(cs.TermLogHost, 0o666); err != nil { // past the umask: the container's user writes it
			return nil, err
		}
		out = append(out, preparedContainer{name: c.Name, spec: cs})
	}
	return out, nil
}

// ClaimDir is the host folder that backs a PersistentVolumeClaim of a
// namespace on this node.
func (p *provider) ClaimDir(namespace, claim string) string {
	return filepath.Join(p.dir, "claims", namespace, claim)
}

func runAsNonRoot(psc *corev1.PodSecurityContext, sc *corev1.SecurityContext) bool {
	if sc != nil && sc.RunAsNonRoot != nil {
		return *sc.RunAsNonRoot
	}
	return psc.RunAsNonRoot != nil && *psc.RunAsNonRoot
}

// termMessage is a container's termination message as the kubelet reads it:
// the file's content (at most 4096 bytes), else, with
// FallbackToLogsOnError and a failure, the end of its logs.
func termMessage(specs []preparedContainer, name string, e exitStatus, logs string) string {
	var spec containerSpec
	for _, s := range specs {
		if s.name == name {
			spec = s.spec
		}
	}
	b, _ := os.ReadFile(spec.TermLogHost)
	msg := string(b)
	if len(msg) > maxMessageBytes {
		msg = msg[:maxMessageBytes]
	}
	if msg == "" && e.Code != 0 && spec.termFallback {
		lines := strings.Split(strings.TrimRight(logs, "\n"), "\n")
		if len(lines) > 80 {
			lines = lines[len(lines)-80:]
		}
		msg = strings.Join(lines, "\n")
		if len(msg) > maxMessageBytes {
			msg = msg[len(msg)-maxMessageBytes:]
		}
	}
	return msg
}

func specImage(specs []preparedContainer, name string) string {
	for _, s := range specs {
		if s.name == name {
			return s.spec.Image
		}
	}
	return ""
}

func specName(specs []preparedContainer, name string) string {
	for _, s := range specs {
		if s.name == name {
			return s.spec.Name
		}
	}
	return ""
}

// mkdirLike makes dir (a subPath) with the group and mode of its volume's
// folder, so the pod's user can write there as in the volume itself.
func mkdirLike(dir, volume string) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	fi, err := os.Stat(volume)
	if err != nil {
		return err
	}
	if st, ok := fi.Sys().(*syscall.Stat_t); ok {
		if err := os.Chown(dir, -1, int(st.Gid)); err != nil {
			return err
		}
	}
	return os.Chmod(dir, fi.Mode()&(os.ModePerm|os.ModeSetgid))
}
