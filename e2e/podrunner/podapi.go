package podrunner

import (
	"context"
	"io"
	"strings"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/virtual-kubelet/virtual-kubelet/errdefs"
	"github.com/virtual-kubelet/virtual-kubelet/node/api"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	statsv1alpha1 "k8s.io/kubelet/pkg/apis/stats/v1alpha1"
)

// The rest of the virtual-kubelet provider interface: reads of pods and
// their status, logs, exec; and the helpers the provider shares.

func (p *provider) GetPod(_ context.Context, ns, name string) (*corev1.Pod, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	st, ok := p.pods[key(ns, name)]
	if !ok {
		return nil, errdefs.NotFoundf("pod %s/%s not found", ns, name)
	}
	return st.pod.DeepCopy(), nil
}

func (p *provider) GetPodStatus(ctx context.Context, ns, name string) (*corev1.PodStatus, error) {
	pod, err := p.GetPod(ctx, ns, name)
	if err != nil {
		return nil, err
	}
	return &pod.Status, nil
}

func (p *provider) GetPods(context.Context) ([]*corev1.Pod, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	out := make([]*corev1.Pod, 0, len(p.pods))
	for _, st := range p.pods {
		out = append(out, st.pod.DeepCopy())
	}
	return out, nil
}

// Logs returns a container's output (for the harness's failure dumps).
func (p *provider) Logs(ns, name, container string) string {
	p.mu.Lock()
	st, ok := p.pods[key(ns, name)]
	if !ok {
		p.mu.Unlock()
		return ""
	}
	if i, ok := st.running[container]; ok {
		p.mu.Unlock()
		return i.Logs()
	}
	defer p.mu.Unlock()
	return st.logs[container]
}

func (p *provider) GetContainerLogs(_ context.Context, ns, name, container string, _ api.ContainerLogOpts) (io.ReadCloser, error) {
	return io.NopCloser(strings.NewReader(p.Logs(ns, name, container))), nil
}

// RunInContainer runs cmd in a running container of the pod (`kubectl
// exec`): docker exec, with the container's user and environment, stdin,
// stdout and stderr (or a TTY) streamed; a non-zero exit code is returned
// as such (the API server's client sees "command terminated with exit code
// N").
func (p *provider) RunInContainer(ctx context.Context, ns, name, container string, cmd []string, aio api.AttachIO) error {
	p.mu.Lock()
	st, ok := p.pods[key(ns, name)]
	var inst instance
	if ok {
		inst = st.running[container]
	}
	p.mu.Unlock()
	if !ok {
		return errdefs.NotFoundf("pod %s/%s not found", ns, name)
	}
	if inst == nil {
		return errdefs.InvalidInputf("container %s of pod %s/%s is not running", container, ns, name)
	}
	return inst.Exec(ctx, cmd, aio)
}

func (p *provider) AttachToContainer(context.Context, string, string, string, api.AttachIO) error {
	return errdefs.InvalidInput("attach is not supported by the pod runner")
}

func (p *provider) GetStatsSummary(context.Context) (*statsv1alpha1.Summary, error) {
	return &statsv1alpha1.Summary{}, nil
}

func (p *provider) GetMetricsResource(context.Context) ([]*dto.MetricFamily, error) { return nil, nil }

func (p *provider) PortForward(context.Context, string, string, int32, io.ReadWriteCloser) error {
	return errdefs.InvalidInput("port-forward is not supported by the pod runner")
}

func setCondition(pod *corev1.Pod, t corev1.PodConditionType, s corev1.ConditionStatus, reason string, now metav1.Time) {
	for i := range pod.Status.Conditions {
		c := &pod.Status.Conditions[i]
		if c.Type == t {
			if c.Status != s {
				c.LastTransitionTime = now
			}
			c.Status, c.Reason = s, reason
			return
		}
	}
	pod.Status.Conditions = append(pod.Status.Conditions, corev1.PodCondition{Type: t, Status: s, Reason: reason, LastTransitionTime: now})
}

func ptrTo[T any](v T) *T { return &v }

// gracePeriod is how long a deleted pod's containers get between SIGTERM and
// SIGKILL: the deletion's grace period, else the pod's, else 30 s.
func gracePeriod(pod *corev1.Pod) time.Duration {
	if g := pod.DeletionGracePeriodSeconds; g != nil {
		return time.Duration(*g) * time.Second
	}
	if g := pod.Spec.TerminationGracePeriodSeconds; g != nil {
		return time.Duration(*g) * time.Second
	}
	return 30 * time.Second
}
