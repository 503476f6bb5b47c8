package podrunner_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"cairn.dev/e2e/podrunner"
	"cairn.dev/libs/testenv"
)

// The base image `make images` builds, run under a made-up repository name
// so the test also goes through the image map.
const (
	baseImage = "cairn.local/debian:bookworm"
	podImage  = "registry.example/tools:v1"
)

var env *testenv.Env

func TestMain(m *testing.M) { testenv.Main(m, testenv.Options{}, &env) }

// start runs a pod runner (Docker: this machine kind has an engine) on a real
// kube-apiserver; pods are bound to its node by spec.nodeName.
func start(t *testing.T) (*podrunner.Runner, string) {
	t.Helper()
	ctx := context.Background()
	ns, err := env.Namespace(ctx, "pr")
	if err != nil {
		t.Fatal(err)
	}
	name := "pods-" + ns
	r, err := podrunner.Start(ctx, podrunner.Options{NodeName: name, Config: env.Config, Dir: t.TempDir(),
		Runtime: podrunner.RuntimeDocker, Images: map[string]string{"registry.example/tools": baseImage}, Logf: t.Logf})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := r.Stop(); err != nil {
			t.Error(err)
		}
	})
	return r, ns
}

func pod(ns, node, name, script string) *corev1.Pod {
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: corev1.PodSpec{
			NodeName:                     node,
			RestartPolicy:                corev1.RestartPolicyNever,
			AutomountServiceAccountToken: ptr.To(false),
			SecurityContext: &corev1.PodSecurityContext{
				RunAsNonRoot: ptr.To(true), RunAsUser: ptr.To[int64](65532), RunAsGroup: ptr.To[int64](65532), FSGroup: ptr.To[int64](65532),
			},
			Containers: []corev1.Container{{
				Name: "main", Image: podImage, Command: []string{"/bin/sh", "-c"}, Args: []string{script},
				Resources: corev1.ResourceRequirements{Limits: corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("64Mi")}},
				SecurityContext: &corev1.SecurityContext{
					AllowPrivilegeEscalation: ptr.To(false), ReadOnlyRootFilesystem: ptr.To(true),
					Capabilities: &corev1.Capabilities{Drop: []corev1.Capability{"ALL"}},
				},
				TerminationMessagePath: corev1.TerminationMessagePathDefault, TerminationMessagePolicy: corev1.TerminationMessageReadFile,
			}},
		},
	}
}

func terminated(g Gomega, c client.Client, p *corev1.Pod) *corev1.ContainerStateTerminated {
	got := &corev1.Pod{}
	g.Expect(c.Get(context.Background(), client.ObjectKeyFromObject(p), got)).To(Succeed())
	g.Expect(got.Status.ContainerStatuses).To(HaveLen(1))
	term := got.Status.ContainerStatuses[0].State.Terminated
	g.Expect(term).NotTo(BeNil(), "container not terminated yet: %+v", got.Status.ContainerStatuses[0].State)
	g.Expect(got.Status.Phase).To(BeElementOf(corev1.PodSucceeded, corev1.PodFailed))
	*p = *got
	return term
}

// A pod's spec reaches the container: Secret and ConfigMap env, the
// non-root user and fsGroup, a read-only root filesystem, no capabilities,
// no-new-privileges, a PVC as a host folder kept for the claim, an emptyDir;
// its exit code and termination message come back in its status.
func TestPodSpecMappedAndResultReported(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	r, ns := start(t)
	c := env.Client
	g.Expect(c.Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "creds"}, StringData: map[string]string{"password": "s3cret"}})).To(Succeed())
	g.Expect(c.Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "conf"}, Data: map[string]string{"mode": "fast"}})).To(Succeed())

	script := `msg="uid=$(id -u) gid=$(id -g) groups=$(id -G) secret=$SECRET cm=$MODE plain=$PLAIN"
if touch /rootfs-probe 2>/dev/null; then msg="$msg rootfs=writable"; else msg="$msg rootfs=readonly"; fi
msg="$msg caps=$(grep CapEff /proc/self/status | cut -f2) nnp=$(grep NoNewPrivs /proc/self/status | cut -f2)"
echo artifact > /store/made-by-pod && echo tmp > /tmp/x && msg="$msg store=ok tmp=ok"
echo "$msg" > /dev/termination-log
echo "to stdout"
exit 3`
	p := pod(ns, r.NodeName, "mapped", script)
	ctr := &p.Spec.Containers[0]
	ctr.Env = []corev1.EnvVar{
		{Name: "PLAIN", Value: "v"},
		{Name: "SECRET", ValueFrom: &corev1.EnvVarSource{SecretKeyRef: &corev1.SecretKeySelector{LocalObjectReference: corev1.LocalObjectReference{Name: "creds"}, Key: "password"}}},
		{Name: "MODE", ValueFrom: &corev1.EnvVarSource{ConfigMapKeyRef: &corev1.ConfigMapKeySelector{LocalObjectReference: corev1.LocalObjectReference{Name: "conf"}, Key: "mode"}}},
	}
	ctr.VolumeMounts = []corev1.VolumeMount{{Name: "store", MountPath: "/store", SubPath: "sub"}, {Name: "tmp", MountPath: "/tmp"}}
	p.Spec.Volumes = []corev1.Volume{
		{Name: "store", VolumeSource: corev1.VolumeSource{PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: "backups"}}},
		{Name: "tmp", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}},
	}
	g.Expect(c.Create(ctx, p)).To(Succeed())

	var term *corev1.ContainerStateTerminated
	g.Eventually(func(g Gomega) { term = terminated(g, c, p) }, 2*time.Minute, 200*time.Millisecond).Should(Succeed())
	g.Expect(p.Status.Phase).To(Equal(corev1.PodFailed))
	g.Expect(term.ExitCode).To(Equal(int32(3)))
	g.Expect(term.Reason).To(Equal("Error"))
	g.Expect(strings.Fields(term.Message)).To(ConsistOf(
		"uid=65532", "gid=65532", "groups=65532", "secret=s3cret", "cm=fast", "plain=v", "rootfs=readonly",
		"caps=0000000000000000", "nnp=1", "store=ok", "tmp=ok"))
	g.Expect(term.StartedAt.Time).NotTo(BeZero())
	g.Expect(term.FinishedAt.Time).NotTo(BeTemporally("<", term.StartedAt.Time))
	g.Expect(r.Logs(ns, "mapped", "main")).To(ContainSubstring("to stdout"))
	// `kubectl logs` works: the API server reads them from the node's kubelet API.
	cs, err := kubernetes.NewForConfig(env.Config)
	g.Expect(err).NotTo(HaveOccurred())
	logs, err := cs.CoreV1().Pods(ns).GetLogs("mapped", &corev1.PodLogOptions{Container: "main"}).DoRaw(ctx)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(string(logs)).To(ContainSubstring("to stdout"))

	// The claim's folder outlives the pod, like a volume.
	b, err := os.ReadFile(filepath.Join(r.ClaimDir(ns, "backups"), "sub", "made-by-pod"))
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(string(b)).To(Equal("artifact\n"))

	// A container that exits 0 makes the pod Succeeded.
	ok := pod(ns, r.NodeName, "ok", `echo '{"done":true}' > /dev/termination-log`)
	g.Expect(c.Create(ctx, ok)).To(Succeed())
	g.Eventually(func(g Gomega) { term = terminated(g, c, ok) }, 2*time.Minute, 200*time.Millisecond).Should(Succeed())
	g.Expect(ok.Status.Phase).To(Equal(corev1.PodSucceeded))
	g.Expect(term.ExitCode).To(BeZero())
	g.Expect(term.Reason).To(Equal("Completed"))
	g.Expect(term.Message).To(Equal(`{"done":true}` + "\n"))
}

// Deleting a running pod stops its container with SIGTERM (the container
// traps it and writes so to a hostPath folder) and the pod leaves the API.
func TestDeleteStopsContainer(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	r, ns := start(t)
	c := env.Client
	out := t.TempDir()
	g.Expect(os.Chmod(out, 0o777)).To(Succeed())
	p := pod(ns, r.NodeName, "sleeper", `trap 'echo got TERM > /out/term; exit 143' TERM; echo started; while :; do sleep 0.2; done`)
	p.Spec.Containers[0].VolumeMounts = []corev1.VolumeMount{{Name: "out", MountPath: "/out"}}
	p.Spec.Volumes = []corev1.Volume{{Name: "out", VolumeSource: corev1.VolumeSource{HostPath: &corev1.HostPathVolumeSource{Path: out}}}}
	g.Expect(c.Create(ctx, p)).To(Succeed())
	g.Eventually(func(g Gomega) {
		got := &corev1.Pod{}
		g.Expect(c.Get(ctx, client.ObjectKeyFromObject(p), got)).To(Succeed())
		g.Expect(got.Status.Phase).To(Equal(corev1.PodRunning))
		g.Expect(r.Logs(ns, "sleeper", "main")).To(ContainSubstring("started"))
	}, 2*time.Minute, 200*time.Millisecond).Should(Succeed())

	g.Expect(c.Delete(ctx, p, client.GracePeriodSeconds(20))).To(Succeed())
	g.Eventually(func() bool {
		return apierrors.IsNotFound(c.Get(ctx, client.ObjectKeyFromObject(p), &corev1.Pod{}))
	}, time.Minute, 200*time.Millisecond).Should(BeTrue(), "the pod stays in the API")
	b, err := os.ReadFile(filepath.Join(out, "term"))
	g.Expect(err).NotTo(HaveOccurred(), "the container never got SIGTERM")
	g.Expect(string(b)).To(Equal("got TERM\n"))
}

// Without Docker the same pod runs as a local process of the agent binary
// (built from agent/): its args reach the binary, its exit code and output
// come back.
func TestProcessModeRunsAgentBinary(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	ns, err := env.Namespace(ctx, "prp")
	g.Expect(err).NotTo(HaveOccurred())
	r, err := podrunner.Start(ctx, podrunner.Options{NodeName: "procs-" + ns, Config: env.Config, Dir: t.TempDir(),
		Runtime: podrunner.RuntimeProcess, Images: map[string]string{"ghcr.io/cairn-dev/agent": "cairn.local/agent:dev"}, Logf: t.Logf})
	g.Expect(err).NotTo(HaveOccurred())
	t.Cleanup(func() { _ = r.Stop() })
	g.Expect(r.Runtime).To(ContainSubstring("local processes"))

	p := pod(ns, r.NodeName, "agent-version", "")
	p.Spec.Containers[0].Image = "ghcr.io/cairn-dev/agent:v0.1.0"
	p.Spec.Containers[0].Command, p.Spec.Containers[0].Args = nil, []string{"--version"}
	g.Expect(env.Client.Create(ctx, p)).To(Succeed())
	var term *corev1.ContainerStateTerminated
	g.Eventually(func(g Gomega) { term = terminated(g, env.Client, p) }, 2*time.Minute, 200*time.Millisecond).Should(Succeed())
	g.Expect(p.Status.Phase).To(Equal(corev1.PodSucceeded))
	g.Expect(term.ExitCode).To(BeZero())
	g.Expect(r.Logs(ns, "agent-version", "main")).NotTo(BeEmpty(), "the agent printed its version")

	bad := pod(ns, r.NodeName, "agent-unknown", "")
	bad.Spec.Containers[0].Image = "ghcr.io/cairn-dev/agent:v0.1.0"
	bad.Spec.Containers[0].Command, bad.Spec.Containers[0].Args = nil, []string{"no-such-command"}
	g.Expect(env.Client.Create(ctx, bad)).To(Succeed())
	g.Eventually(func(g Gomega) { term = terminated(g, env.Client, bad) }, 2*time.Minute, 200*time.Millisecond).Should(Succeed())
	g.Expect(bad.Status.Phase).To(Equal(corev1.PodFailed))
	g.Expect(term.ExitCode).To(BeEquivalentTo(2), "the agent's usage error")
}
