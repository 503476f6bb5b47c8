package podrunner

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// preparedContainer is one container's runtime spec.
type preparedContainer struct {
	name string
	spec containerSpec
}

// preparedPod is what prepare makes of a pod: its init containers (run one
// after the other, in order) and its containers.
type preparedPod struct {
	inits, containers []preparedContainer
	// synced are its configMap and Secret volumes, kept up to date while
	// it runs (syncVolumes).
	synced []syncedVolume
}

// errVolumeSource is a configMap or Secret volume whose object (or key) is
// not there yet: the kubelet keeps such a pod in ContainerCreating and tries
// again, and so does the runner.
type errVolumeSource struct{ msg string }

func (e *errVolumeSource) Error() string { return e.msg }

// prepare maps the pod to runtime specs: its volumes to host folders (an
// emptyDir per pod, a PersistentVolumeClaim its volume's folder — a claim
// not bound to a volume one of its own — kept across pods like a real
// volume; hostPath as is; a configMap or Secret
// projected into a folder of the pod, its keys as files, mounted read-only),
// the termination message to a host file, and the security context.
func (p *provider) prepare(ctx context.Context, st *podState) (*preparedPod, error) {
	pod := st.pod
	for _, c := range pod.Spec.InitContainers {
		if c.RestartPolicy != nil && *c.RestartPolicy == corev1.ContainerRestartPolicyAlways {
			return nil, fmt.Errorf("init container %s: sidecar containers (restartPolicy: Always) are not supported by the pod runner", c.Name)
		}
	}
	if err := os.MkdirAll(st.dir, 0o755); err != nil {
		return nil, err
	}
	psc := pod.Spec.SecurityContext
	if psc == nil {
		psc = &corev1.PodSecurityContext{}
	}
	volumes := map[string]string{}
	readOnly := map[string]bool{}
	var synced []syncedVolume
	for _, v := range pod.Spec.Volumes {
		var dir string
		switch {
		case v.EmptyDir != nil:
			dir = filepath.Join(st.dir, "volumes", v.Name)
		case v.PersistentVolumeClaim != nil:
			dir = p.claimDir(ctx, pod.Namespace, v.PersistentVolumeClaim.ClaimName)
		case v.HostPath != nil:
			volumes[v.Name] = v.HostPath.Path
			continue
		case v.ConfigMap != nil || v.Secret != nil:
			dir = filepath.Join(st.dir, "volumes", v.Name)
			if err := p.project(ctx, pod.Namespace, v, dir, psc.FSGroup); err != nil {
				return nil, err
			}
			volumes[v.Name], readOnly[v.Name] = dir, true
			synced = append(synced, syncedVolume{namespace: pod.Namespace, volume: v, dir: dir, fsGroup: psc.FSGroup})
			continue
		case v.Projected != nil:
			dir = filepath.Join(st.dir, "volumes", v.Name)
			if err := p.projectAll(ctx, st, v, dir, psc.FSGroup); err != nil {
				return nil, err
			}
			volumes[v.Name], readOnly[v.Name] = dir, true
			continue
		default:
			return nil, fmt.Errorf("volume %s: only emptyDir, persistentVolumeClaim, hostPath, configMap, secret and projected volumes are supported by the pod runner", v.Name)
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
	own, err := p.ownNetwork(ctx, pod)
	if err != nil {
		return nil, err
	}
	out := &preparedPod{synced: synced}
	for i, c := range append(append([]corev1.Container{}, pod.Spec.InitContainers...), pod.Spec.Containers...) {
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
		// $(VAR) in command and args from the container's env, as the kubelet
		// expands them (the operators' Deployments pass --agent-image=$(AGENT_IMAGE)).
		cs.Command, cs.Args = expandAll(c.Command, c.Env), expandAll(c.Args, c.Env)
		if own {
			// The API server's address for in-cluster configuration: the
			// host's, as the pod's network reaches it, in place of the
			// kubernetes Service's ClusterIP that virtual-kubelet puts in the
			// env as the kubelet does (no kube-proxy routes it here).
			cs.OwnNetwork, cs.Hostname = true, pod.Name
			cs.Env = append(cs.Env, "KUBERNETES_SERVICE_HOST="+p.podGateway, "KUBERNETES_SERVICE_PORT="+p.apiPort)
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
				if readOnly[vm.Name] { // a configMap or Secret: the subPath is a key's file (or folder)
					if _, err := os.Stat(host); err != nil {
						return nil, fmt.Errorf("container %s: subPath %s of volume %s: %w", c.Name, vm.SubPath, vm.Name, err)
					}
				} else if err := mkdirLike(host, parent); err != nil {
					return nil, err
				}
			}
			cs.Mounts = append(cs.Mounts, hostMount{Host: host, Container: vm.MountPath, ReadOnly: vm.ReadOnly || readOnly[vm.Name]})
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
		if i < len(pod.Spec.InitContainers) {
			out.inits = append(out.inits, preparedContainer{name: c.Name, spec: cs})
		} else {
			out.containers = append(out.containers, preparedContainer{name: c.Name, spec: cs})
		}
	}
	return out, nil
}

// project writes a configMap or Secret volume into dir as the kubelet does:
// each key a file (or only the items, at their paths), mode the item's, else
// defaultMode, else 0644; with an fsGroup the files belong to that group and
// are group-readable. A missing object or key is an errVolumeSource unless
// the volume is optional (then the folder stays empty, or the key is left
// out).
func (p *provider) project(ctx context.Context, ns string, v corev1.Volume, dir string, fsGroup *int64) error {
	files, err := p.volumeFiles(ctx, ns, v)
	if err != nil {
		return err
	}
	return writeProjected(dir, files, fsGroup)
}

// volumeFiles reads the files of a configMap or Secret volume.
func (p *provider) volumeFiles(ctx context.Context, ns string, v corev1.Volume) ([]projectedFile, error) {
	if cm := v.ConfigMap; cm != nil {
		return p.configMapFiles(ctx, ns, v.Name, cm.Name, cm.Items, cm.DefaultMode, cm.Optional)
	}
	sec := v.Secret
	return p.secretFiles(ctx, ns, v.Name, sec.SecretName, sec.Items, sec.DefaultMode, sec.Optional)
}

// projectedFile is one file of a configMap, Secret or projected volume.
type projectedFile struct {
	path string
	data []byte
	mode int32
}

func (p *provider) configMapFiles(ctx context.Context, ns, volume, name string, items []corev1.KeyToPath, defaultMode *int32, optional *bool) ([]projectedFile, error) {
	data := map[string][]byte{}
	obj, err := p.cs.CoreV1().ConfigMaps(ns).Get(ctx, name, metav1.GetOptions{})
	if err == nil {
		for k, val := range obj.Data {
			data[k] = []byte(val)
		}
		for k, val := range obj.BinaryData {
			data[k] = val
		}
	}
	return keyFiles(volume, "configmap "+name, data, err, items, defaultMode, optional != nil && *optional)
}

func (p *provider) secretFiles(ctx context.Context, ns, volume, name string, items []corev1.KeyToPath, defaultMode *int32, optional *bool) ([]projectedFile, error) {
	var data map[string][]byte
	obj, err := p.cs.CoreV1().Secrets(ns).Get(ctx, name, metav1.GetOptions{})
	if err == nil {
		data = obj.Data
	}
	return keyFiles(volume, "secret "+name, data, err, items, defaultMode, optional != nil && *optional)
}

// keyFiles turns an object's keys (read with err) into files: every key, or
// only items at their paths.
func keyFiles(volume, what string, data map[string][]byte, err error, items []corev1.KeyToPath, defaultMode *int32, optional bool) ([]projectedFile, error) {
	switch {
	case apierrors.IsNotFound(err) && optional:
		data = nil
	case apierrors.IsNotFound(err):
		return nil, &errVolumeSource{fmt.Sprintf("volume %s: %s not found", volume, what)}
	case err != nil:
		return nil, fmt.Errorf("volume %s: reading %s: %w", volume, what, err)
	}
	if len(items) == 0 {
		for k := range data {
			items = append(items, corev1.KeyToPath{Key: k, Path: k})
		}
	}
	var files []projectedFile
	for _, it := range items {
		b, ok := data[it.Key]
		if !ok {
			if optional {
				continue
			}
			return nil, &errVolumeSource{fmt.Sprintf("volume %s: %s has no key %q", volume, what, it.Key)}
		}
		mode := int32(corev1.SecretVolumeSourceDefaultMode) // 0644, the same for configMaps
		if defaultMode != nil {
			mode = *defaultMode
		}
		if it.Mode != nil {
			mode = *it.Mode
		}
		files = append(files, projectedFile{path: it.Path, data: b, mode: mode})
	}
	return files, nil
}

// writeProjected writes files into dir, afresh (a retry after a missing key
// starts over); with an fsGroup they belong to that group, group-readable.
func writeProjected(dir string, files []projectedFile, fsGroup *int64) error {
	if err := os.RemoveAll(dir); err != nil {
		return err
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	for _, f := range files {
		if err := writeFile(filepath.Join(dir, filepath.Clean("/"+f.path)), f, fsGroup); err != nil {
			return err
		}
	}
	return nil
}

// writeFile writes one projected file, through a temporary file renamed
// into place (a reader of the mounted folder sees the old content or the
// new one, whole).
func writeFile(file string, f projectedFile, fsGroup *int64) error {
	if err := os.MkdirAll(filepath.Dir(file), 0o755); err != nil {
		return err
	}
	tmp := filepath.Join(filepath.Dir(file), ".."+filepath.Base(file)+".new")
	if err := os.WriteFile(tmp, f.data, 0o600); err != nil {
		return err
	}
	mode := f.mode
	if fsGroup != nil {
		if err := os.Chown(tmp, -1, int(*fsGroup)); err != nil {
			return err
		}
		mode |= 0o440
	}
	if err := os.Chmod(tmp, os.FileMode(mode)&os.ModePerm); err != nil {
		return err
	}
	return os.Rename(tmp, file)
}

// claimDir is the host folder that backs a PersistentVolumeClaim of a
// namespace on this node: the folder of the PersistentVolume it is bound
// to (spec.volumeName), as with a real volume, whose data any claim bound
// to it later sees; for a claim without a volume (or none at all: the pod
// runner's own tests), a folder of its own.
func (p *provider) claimDir(ctx context.Context, namespace, claim string) string {
	c, err := p.cs.CoreV1().PersistentVolumeClaims(namespace).Get(ctx, claim, metav1.GetOptions{})
	if err == nil && c.Spec.VolumeName != "" {
		return p.volumeDir(c.Spec.VolumeName)
	}
	return filepath.Join(p.dir, "claims", namespace, claim)
}

// volumeDir is the host folder of a PersistentVolume on this node.
func (p *provider) volumeDir(volume string) string {
	return filepath.Join(p.dir, "volumes", volume)
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

// expandAll expands $(NAME) references to env's values in each of in, with
// the kubelet's rules: $$ is a literal $, an unknown NAME stays as written.
func expandAll(in []string, env []corev1.EnvVar) []string {
	if in == nil {
		return nil
	}
	vars := map[string]string{}
	for _, e := range env {
		vars[e.Name] = e.Value
	}
	out := make([]string, len(in))
	for i, s := range in {
		var b strings.Builder
		for j := 0; j < len(s); j++ {
			if s[j] != '$' || j+1 >= len(s) {
				b.WriteByte(s[j])
				continue
			}
			switch next := s[j+1]; {
			case next == '$':
				b.WriteByte('$')
				j++
			case next == '(':
				end := strings.IndexByte(s[j+2:], ')')
				if end < 0 {
					b.WriteByte('$')
					continue
				}
				name := s[j+2 : j+2+end]
				if v, ok := vars[name]; ok {
					b.WriteString(v)
				} else {
					b.WriteString(s[j : j+3+end])
				}
				j += 2 + end
			default:
				b.WriteByte('$')
			}
		}
		out[i] = b.String()
	}
	return out
}
