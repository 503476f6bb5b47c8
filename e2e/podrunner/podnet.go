package podrunner

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
)

// What the runner gives pods that serve (an operator's Deployment) besides
// what every pod gets: a network of their own, in-cluster configuration
// (KUBERNETES_SERVICE_HOST/PORT, the projected ServiceAccount token, kept
// fresh, the cluster's CA and namespace) and their probes.

// ownNetwork says whether the pod runs in a network of its own: a pod that
// declares container ports serves them (webhooks, metrics, probes), so each
// replica needs its own address, as on a cluster; other pods (the agent's
// Job pods) share the host's network and reach the servers on loopback.
// Only a one-container pod can: the runner does not join containers into one
// network namespace.
func (p *provider) ownNetwork(ctx context.Context, pod *corev1.Pod) (bool, error) {
	ports := false
	for _, c := range pod.Spec.Containers {
		ports = ports || len(c.Ports) > 0
	}
	if !ports || pod.Spec.HostNetwork {
		return false, nil
	}
	gw, err := p.rt.PodNetwork(ctx)
	if err != nil || gw == "" {
		return false, err
	}
	if len(pod.Spec.Containers)+len(pod.Spec.InitContainers) > 1 {
		return false, fmt.Errorf("a pod that declares ports runs on the pod runner with one container only (it has %d)",
			len(pod.Spec.Containers)+len(pod.Spec.InitContainers))
	}
	p.mu.Lock()
	p.podGateway = gw
	p.mu.Unlock()
	return true, nil
}

// projectAll writes a projected volume into dir: configMap, Secret and
// downwardAPI (metadata fields) sources, and a serviceAccountToken from the
// TokenRequest API bound to the pod, which is requested again at 80 % of its
// life, as the kubelet does, while the pod runs.
func (p *provider) projectAll(ctx context.Context, st *podState, v corev1.Volume, dir string, fsGroup *int64) error {
	pod := st.pod
	var files []projectedFile
	var token *corev1.ServiceAccountTokenProjection
	var tokenMode int32 = corev1.ProjectedVolumeSourceDefaultMode
	if m := v.Projected.DefaultMode; m != nil {
		tokenMode = *m
	}
	for _, src := range v.Projected.Sources {
		switch {
		case src.ConfigMap != nil:
			f, err := p.configMapFiles(ctx, pod.Namespace, v.Name, src.ConfigMap.Name, src.ConfigMap.Items, v.Projected.DefaultMode, src.ConfigMap.Optional)
			if err != nil {
				return err
			}
			files = append(files, f...)
		case src.Secret != nil:
			f, err := p.secretFiles(ctx, pod.Namespace, v.Name, src.Secret.Name, src.Secret.Items, v.Projected.DefaultMode, src.Secret.Optional)
			if err != nil {
				return err
			}
			files = append(files, f...)
		case src.DownwardAPI != nil:
			for _, it := range src.DownwardAPI.Items {
				if it.FieldRef == nil {
					return fmt.Errorf("volume %s: downwardAPI item %s: only fieldRef is supported by the pod runner", v.Name, it.Path)
				}
				val, err := fieldRef(pod, it.FieldRef.FieldPath)
				if err != nil {
					return fmt.Errorf("volume %s: %w", v.Name, err)
				}
				mode := tokenMode
				if it.Mode != nil {
					mode = *it.Mode
				}
				files = append(files, projectedFile{path: it.Path, data: []byte(val), mode: mode})
			}
		case src.ServiceAccountToken != nil:
			token = src.ServiceAccountToken
		default:
			return fmt.Errorf("volume %s: a projected source the pod runner does not support", v.Name)
		}
	}
	if err := writeProjected(dir, files, fsGroup); err != nil {
		return err
	}
	if token == nil {
		return nil
	}
	ttl, err := p.writeToken(ctx, pod, token, dir, tokenMode)
	if err != nil {
		return err
	}
	go p.refreshToken(st, token, dir, tokenMode, ttl)
	return nil
}

// writeToken requests a token for the pod's ServiceAccount bound to the pod
// and writes it atomically (a rename in the mounted folder, so a reader sees
// the old or the new token whole). It returns the token's life.
func (p *provider) writeToken(ctx context.Context, pod *corev1.Pod, t *corev1.ServiceAccountTokenProjection, dir string, mode int32) (time.Duration, error) {
	exp := int64(3600)
	if t.ExpirationSeconds != nil {
		exp = *t.ExpirationSeconds
	}
	tr := &authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{
		ExpirationSeconds: &exp,
		BoundObjectRef:    &authenticationv1.BoundObjectReference{Kind: "Pod", APIVersion: "v1", Name: pod.Name, UID: pod.UID},
	}}
	if t.Audience != "" {
		tr.Spec.Audiences = []string{t.Audience}
	}
	sa := pod.Spec.ServiceAccountName
	if sa == "" {
		sa = "default"
	}
	out, err := p.cs.CoreV1().ServiceAccounts(pod.Namespace).CreateToken(ctx, sa, tr, metav1.CreateOptions{})
	if err != nil {
		return 0, fmt.Errorf("token for ServiceAccount %s/%s: %w", pod.Namespace, sa, err)
	}
	file := filepath.Join(dir, filepath.Clean("/"+t.Path))
	tmp := file + ".new"
	if err := os.WriteFile(tmp, []byte(out.Status.Token), 0o600); err != nil {
		return 0, err
	}
	if err := os.Chmod(tmp, os.FileMode(mode)&os.ModePerm); err != nil {
		return 0, err
	}
	if err := os.Rename(tmp, file); err != nil {
		return 0, err
	}
	return time.Until(out.Status.ExpirationTimestamp.Time), nil
}

// refreshToken requests the pod's token again at 80 % of its life (at most
// every 24 h, as the kubelet), until the pod ends.
func (p *provider) refreshToken(st *podState, t *corev1.ServiceAccountTokenProjection, dir string, mode int32, ttl time.Duration) {
	for {
		wait := min(ttl*8/10, 24*time.Hour)
		if !p.pause(st, max(wait, time.Second)) || p.isFinished(st) {
			return
		}
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		next, err := p.writeToken(ctx, st.pod, t, dir, mode)
		cancel()
		if err != nil {
			p.logf("pod runner: pod %s/%s: refreshing its token: %v", st.pod.Namespace, st.pod.Name, err)
			next = 12500 * time.Millisecond // tried again in 10 s (80 %)
		}
		ttl = next
	}
}

func (p *provider) isFinished(st *podState) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return st.finished
}

func fieldRef(pod *corev1.Pod, path string) (string, error) {
	switch path {
	case "metadata.namespace":
		return pod.Namespace, nil
	case "metadata.name":
		return pod.Name, nil
	case "metadata.uid":
		return string(pod.UID), nil
	case "spec.serviceAccountName":
		return pod.Spec.ServiceAccountName, nil
	}
	return "", fmt.Errorf("fieldRef %s is not supported by the pod runner", path)
}

// probe runs a container's readiness and liveness probes (httpGet) against
// the pod's address while it runs: readiness sets the container's ready
// flag and the pod's Ready conditions (so its Service's endpoints follow);
// a liveness probe that fails failureThreshold times in a row stops the
// container, as the kubelet kills it (the runner does not restart it in
// place: the pod ends and its ReplicaSet replaces it).
func (p *provider) probe(st *podState, c corev1.Container, ip string, inst instance) {
	if c.ReadinessProbe != nil {
		go p.runProbe(st, c, c.ReadinessProbe, ip, func(ok bool) { p.setReady(st, c.Name, ok) })
	}
	if c.LivenessProbe != nil {
		go p.runProbe(st, c, c.LivenessProbe, ip, func(ok bool) {
			if !ok {
				p.logf("pod runner: pod %s/%s: container %s failed its liveness probe: stopping it", st.pod.Namespace, st.pod.Name, c.Name)
				inst.Stop(gracePeriod(st.pod))
			}
		})
	}
}

// runProbe calls report with each change of the probe's verdict (success
// after successThreshold successes, failure after failureThreshold failures).
func (p *provider) runProbe(st *podState, c corev1.Container, pr *corev1.Probe, ip string, report func(bool)) {
	if pr.HTTPGet == nil {
		p.logf("pod runner: pod %s/%s: container %s: only httpGet probes are run; this one is taken as passing", st.pod.Namespace, st.pod.Name, c.Name)
		report(true)
		return
	}
	period := time.Duration(max(pr.PeriodSeconds, 1)) * time.Second
	timeout := time.Duration(max(pr.TimeoutSeconds, 1)) * time.Second
	successes, failures := max(pr.SuccessThreshold, 1), max(pr.FailureThreshold, 1)
	if pr.FailureThreshold == 0 {
		failures = 3
	}
	port, err := probePort(c, pr.HTTPGet.Port)
	if err != nil {
		p.logf("pod runner: pod %s/%s: container %s: %v", st.pod.Namespace, st.pod.Name, c.Name, err)
		return
	}
	host := pr.HTTPGet.Host
	if host == "" {
		host = ip
	}
	scheme := "http"
	if pr.HTTPGet.Scheme == corev1.URISchemeHTTPS {
		scheme = "https"
	}
	url := fmt.Sprintf("%s://%s%s", scheme, net.JoinHostPort(host, strconv.Itoa(port)), pr.HTTPGet.Path)
	hc := &http.Client{Timeout: timeout}
	if !p.pause(st, time.Duration(pr.InitialDelaySeconds)*time.Second) {
		return
	}
	var state *bool
	okRun, failRun := int32(0), int32(0)
	for !p.isFinished(st) {
		ok := false
		if resp, err := hc.Get(url); err == nil {
			resp.Body.Close()
			ok = resp.StatusCode >= 200 && resp.StatusCode < 400
		}
		if ok {
			okRun, failRun = okRun+1, 0
		} else {
			okRun, failRun = 0, failRun+1
		}
		switch {
		case okRun >= successes && (state == nil || !*state):
			state = ptrTo(true)
			report(true)
		case failRun >= failures && (state == nil || *state):
			state = ptrTo(false)
			report(false)
		}
		if !p.pause(st, period) {
			return
		}
	}
}

func probePort(c corev1.Container, port intstr.IntOrString) (int, error) {
	if port.Type == intstr.Int {
		return port.IntValue(), nil
	}
	for _, cp := range c.Ports {
		if cp.Name == port.StrVal {
			return int(cp.ContainerPort), nil
		}
	}
	return 0, fmt.Errorf("probe port %q is none of the container's ports", port.StrVal)
}

// setReady records a readiness verdict of a container and the pod's Ready
// and ContainersReady conditions (all containers ready).
func (p *provider) setReady(st *podState, container string, ready bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if st.finished {
		return
	}
	all := true
	for i := range st.pod.Status.ContainerStatuses {
		s := &st.pod.Status.ContainerStatuses[i]
		if s.Name == container {
			s.Ready = ready
		}
		all = all && s.Ready
	}
	now := metav1.Now()
	status, reason := corev1.ConditionTrue, ""
	if !all {
		status, reason = corev1.ConditionFalse, "ContainersNotReady"
	}
	setCondition(st.pod, corev1.ContainersReady, status, reason, now)
	setCondition(st.pod, corev1.PodReady, status, reason, now)
	p.publish(st)
}

// running records that the pod's containers started: phase Running, the
// pod's address (its own network's, else the host's), each container ready
// at once unless it has a readiness probe, whose runs (and the liveness
// probe's) start here.
func (p *provider) running(st *podState, started map[string]instance, all []preparedContainer) {
	p.mu.Lock()
	now := metav1.Now()
	st.pod.Status.Phase = corev1.PodRunning
	ip := p.hostIP
	for _, inst := range started {
		if a := inst.IP(); a != "" {
			ip = a
			st.pod.Status.PodIP, st.pod.Status.PodIPs = a, []corev1.PodIP{{IP: a}}
		}
	}
	allReady := true
	for i := range st.pod.Status.ContainerStatuses {
		s := &st.pod.Status.ContainerStatuses[i]
		s.State = corev1.ContainerState{Running: &corev1.ContainerStateRunning{StartedAt: now}}
		// Ready at once, unless a readiness probe says so (podnet.go).
		s.Ready, s.Started = containerSpecOf(st.pod, s.Name).ReadinessProbe == nil, ptrTo(true)
		allReady = allReady && s.Ready
		s.ImageID = specImage(all, s.Name)
		s.ContainerID = "cairn-pod-runner://" + specName(all, s.Name)
	}
	if allReady {
		setCondition(st.pod, corev1.ContainersReady, corev1.ConditionTrue, "", now)
		setCondition(st.pod, corev1.PodReady, corev1.ConditionTrue, "", now)
	}
	p.publish(st)
	p.mu.Unlock()
	for _, c := range st.pod.Spec.Containers {
		p.probe(st, c, ip, started[c.Name])
	}
}

// containerSpecOf is the pod's container of that name (empty if none).
func containerSpecOf(pod *corev1.Pod, name string) corev1.Container {
	for _, c := range pod.Spec.Containers {
		if c.Name == name {
			return c
		}
	}
	return corev1.Container{}
}
