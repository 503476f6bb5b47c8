package podrunner_test

import (
	"bytes"
	"context"
	"errors"
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
	"k8s.io/apimachinery/pkg/util/httpstream"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/tools/remotecommand"
	utilexec "k8s.io/client-go/util/exec"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"cairn.dev/e2e/podrunner"
	"cairn.dev/libs/testing/testenv"
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

// Init containers run one after the other before the pod's container (each
// appends to a shared emptyDir; the container reads it), their statuses and
// termination messages are written back, and Initialized turns True.
func TestInitContainersRunInOrder(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	r, ns := start(t)
	c := env.Client
	p := pod(ns, r.NodeName, "inits", `cat /work/order > /dev/termination-log`)
	p.Spec.Volumes = []corev1.Volume{{Name: "work", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}}}
	mount := []corev1.VolumeMount{{Name: "work", MountPath: "/work"}}
	p.Spec.Containers[0].VolumeMounts = mount
	for _, name := range []string{"first", "second"} {
		ic := *p.Spec.Containers[0].DeepCopy()
		ic.Name, ic.Args = name, []string{`echo ` + name + ` >> /work/order && echo "` + name + ` done" > /dev/termination-log`}
		p.Spec.InitContainers = append(p.Spec.InitContainers, ic)
	}
	g.Expect(c.Create(ctx, p)).To(Succeed())
	var term *corev1.ContainerStateTerminated
	g.Eventually(func(g Gomega) { term = terminated(g, c, p) }, 2*time.Minute, 200*time.Millisecond).Should(Succeed())
	g.Expect(p.Status.Phase).To(Equal(corev1.PodSucceeded))
	g.Expect(term.Message).To(Equal("first\nsecond\n"), "the init containers ran in order, before the container")
	g.Expect(p.Status.InitContainerStatuses).To(HaveLen(2))
	for i, s := range p.Status.InitContainerStatuses {
		g.Expect(s.Name).To(Equal(p.Spec.InitContainers[i].Name))
		g.Expect(s.State.Terminated).NotTo(BeNil())
		g.Expect(s.State.Terminated.ExitCode).To(BeZero())
		g.Expect(s.State.Terminated.Reason).To(Equal("Completed"))
		g.Expect(s.State.Terminated.Message).To(Equal(s.Name + " done\n"))
		g.Expect(s.Ready).To(BeTrue())
	}
	g.Expect(p.Status.InitContainerStatuses[1].State.Terminated.StartedAt.Time).NotTo(
		BeTemporally("<", p.Status.InitContainerStatuses[0].State.Terminated.FinishedAt.Time))
	g.Expect(condition(p, corev1.PodInitialized)).To(Equal(corev1.ConditionTrue))
}

// A failing init container fails the pod under restartPolicy Never (its
// container never starts), and runs again under OnFailure.
func TestFailingInitContainer(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	r, ns := start(t)
	c := env.Client
	withInit := func(name, script string) *corev1.Pod {
		p := pod(ns, r.NodeName, name, `echo main ran > /dev/termination-log`)
		ic := *p.Spec.Containers[0].DeepCopy()
		ic.Name, ic.Args = "setup", []string{script}
		p.Spec.InitContainers = []corev1.Container{ic}
		return p
	}

	never := withInit("init-fails", `echo "no schema" > /dev/termination-log; exit 4`)
	g.Expect(c.Create(ctx, never)).To(Succeed())
	g.Eventually(func(g Gomega) {
		g.Expect(c.Get(ctx, client.ObjectKeyFromObject(never), never)).To(Succeed())
		g.Expect(never.Status.Phase).To(Equal(corev1.PodFailed))
	}, 2*time.Minute, 200*time.Millisecond).Should(Succeed())
	is := never.Status.InitContainerStatuses
	g.Expect(is).To(HaveLen(1))
	g.Expect(is[0].State.Terminated).NotTo(BeNil())
	g.Expect(is[0].State.Terminated.ExitCode).To(Equal(int32(4)))
	g.Expect(is[0].State.Terminated.Reason).To(Equal("Error"))
	g.Expect(is[0].State.Terminated.Message).To(Equal("no schema\n"))
	g.Expect(is[0].RestartCount).To(BeZero())
	g.Expect(never.Status.ContainerStatuses[0].State.Waiting).NotTo(BeNil(), "the container never started")
	g.Expect(never.Status.ContainerStatuses[0].State.Waiting.Reason).To(Equal("PodInitializing"))
	g.Expect(condition(never, corev1.PodInitialized)).To(Equal(corev1.ConditionFalse))

	// OnFailure: the first run fails (it leaves a mark on a hostPath), the
	// second succeeds, then the container runs.
	state := t.TempDir()
	g.Expect(os.Chmod(state, 0o777)).To(Succeed())
	retried := withInit("init-retried", `if [ -e /state/tried ]; then exit 0; fi; touch /state/tried; exit 5`)
	retried.Spec.RestartPolicy = corev1.RestartPolicyOnFailure
	retried.Spec.Volumes = []corev1.Volume{{Name: "state", VolumeSource: corev1.VolumeSource{HostPath: &corev1.HostPathVolumeSource{Path: state}}}}
	retried.Spec.InitContainers[0].VolumeMounts = []corev1.VolumeMount{{Name: "state", MountPath: "/state"}}
	g.Expect(c.Create(ctx, retried)).To(Succeed())
	var term *corev1.ContainerStateTerminated
	g.Eventually(func(g Gomega) { term = terminated(g, c, retried) }, 2*time.Minute, 200*time.Millisecond).Should(Succeed())
	g.Expect(retried.Status.Phase).To(Equal(corev1.PodSucceeded))
	g.Expect(term.Message).To(Equal("main ran\n"))
	s := retried.Status.InitContainerStatuses[0]
	g.Expect(s.RestartCount).To(Equal(int32(1)))
	g.Expect(s.LastTerminationState.Terminated).NotTo(BeNil())
	g.Expect(s.LastTerminationState.Terminated.ExitCode).To(Equal(int32(5)))
	g.Expect(s.State.Terminated).NotTo(BeNil())
	g.Expect(s.State.Terminated.ExitCode).To(BeZero())
}

// configMap and Secret volumes are projected into a folder of the pod with
// their keys as files (items and modes honoured, group fsGroup) and mounted
// read-only; a pod whose Secret does not exist yet waits for it, as with the
// kubelet.
func TestConfigMapAndSecretVolumes(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	r, ns := start(t)
	c := env.Client
	g.Expect(c.Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "app"},
		Data: map[string]string{"app.conf": "level=debug\n", "other": "x"}, BinaryData: map[string][]byte{"blob": {0, 1, 2}}})).To(Succeed())

	script := `set -e
msg="conf=$(cat /etc/app/app.conf) blob=$(wc -c < /etc/app/blob) files=$(ls /etc/app | tr '\n' ,)"
msg="$msg confmode=$(stat -c %a /etc/app/app.conf) group=$(stat -c %g /etc/app/app.conf)"
msg="$msg single=$(cat /etc/app.conf)"
msg="$msg secret=$(cat /etc/creds/db/password) secretmode=$(stat -c %a /etc/creds/db/password) secretfiles=$(ls -R /etc/creds | tr -d '\n')"
if touch /etc/app/new 2>/dev/null; then msg="$msg cm=writable"; else msg="$msg cm=readonly"; fi
if touch /etc/creds/new 2>/dev/null; then msg="$msg secret=writable"; else msg="$msg secretdir=readonly"; fi
echo "$msg" > /dev/termination-log`
	p := pod(ns, r.NodeName, "volumes", script)
	p.Spec.Volumes = []corev1.Volume{
		{Name: "app", VolumeSource: corev1.VolumeSource{ConfigMap: &corev1.ConfigMapVolumeSource{
			LocalObjectReference: corev1.LocalObjectReference{Name: "app"}, DefaultMode: ptr.To[int32](0o600)}}},
		{Name: "creds", VolumeSource: corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{SecretName: "db",
			Items: []corev1.KeyToPath{{Key: "password", Path: "db/password", Mode: ptr.To[int32](0o400)}}}}},
	}
	p.Spec.Containers[0].VolumeMounts = []corev1.VolumeMount{
		{Name: "app", MountPath: "/etc/app"},
		{Name: "app", MountPath: "/etc/app.conf", SubPath: "app.conf"},
		{Name: "creds", MountPath: "/etc/creds"},
	}
	g.Expect(c.Create(ctx, p)).To(Succeed())
	g.Eventually(func(g Gomega) {
		got := &corev1.Pod{}
		g.Expect(c.Get(ctx, client.ObjectKeyFromObject(p), got)).To(Succeed())
		g.Expect(got.Status.Phase).To(Equal(corev1.PodPending))
		g.Expect(got.Status.ContainerStatuses).To(HaveLen(1))
		w := got.Status.ContainerStatuses[0].State.Waiting
		g.Expect(w).NotTo(BeNil())
		g.Expect(w.Message).To(ContainSubstring(`secret db not found`))
	}, time.Minute, 200*time.Millisecond).Should(Succeed())
	g.Expect(c.Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "db"},
		StringData: map[string]string{"password": "s3cret", "unused": "not projected"}})).To(Succeed())

	var term *corev1.ContainerStateTerminated
	g.Eventually(func(g Gomega) { term = terminated(g, c, p) }, 2*time.Minute, 200*time.Millisecond).Should(Succeed())
	g.Expect(p.Status.Phase).To(Equal(corev1.PodSucceeded), "message: %s", term.Message)
	g.Expect(strings.Fields(term.Message)).To(ConsistOf(
		"conf=level=debug", "blob=3", "files=app.conf,blob,other,", "confmode=640", "group=65532", "single=level=debug",
		"secret=s3cret", "secretmode=440", "secretfiles=/etc/creds:db/etc/creds/db:password", "cm=readonly", "secretdir=readonly"))
}

// `kubectl exec` reaches the running container through the API server and
// the node's kubelet API: stdout, stderr, stdin and the exit code.
func TestExecInRunningContainer(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	r, ns := start(t)
	c := env.Client
	p := pod(ns, r.NodeName, "sleeper", `echo started; while :; do sleep 0.2; done`)
	p.Spec.Containers[0].Env = []corev1.EnvVar{{Name: "GREETING", Value: "hello"}}
	g.Expect(c.Create(ctx, p)).To(Succeed())
	g.Eventually(func(g Gomega) {
		got := &corev1.Pod{}
		g.Expect(c.Get(ctx, client.ObjectKeyFromObject(p), got)).To(Succeed())
		g.Expect(got.Status.Phase).To(Equal(corev1.PodRunning))
	}, 2*time.Minute, 200*time.Millisecond).Should(Succeed())

	stdout, stderr, err := execIn(ctx, t, ns, "sleeper", "", "sh", "-c", `echo "$GREETING as $(id -u)"; echo oops >&2; exit 7`)
	var exitErr utilexec.CodeExitError
	g.Expect(errors.As(err, &exitErr)).To(BeTrue(), "a non-zero exit code comes back: %v", err)
	g.Expect(exitErr.Code).To(Equal(7))
	g.Expect(stdout).To(Equal("hello as 65532\n"))
	g.Expect(stderr).To(Equal("oops\n"))

	stdout, _, err = execIn(ctx, t, ns, "sleeper", "piped in\n", "cat")
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(stdout).To(Equal("piped in\n"))
}

func execIn(ctx context.Context, t *testing.T, ns, name, stdin string, cmd ...string) (string, string, error) {
	cs, err := kubernetes.NewForConfig(env.Config)
	if err != nil {
		return "", "", err
	}
	req := cs.CoreV1().RESTClient().Post().Resource("pods").Namespace(ns).Name(name).SubResource("exec").
		VersionedParams(&corev1.PodExecOptions{Container: "main", Command: cmd, Stdin: stdin != "", Stdout: true, Stderr: true}, scheme.ParameterCodec)
	spdy, err := remotecommand.NewSPDYExecutor(env.Config, "POST", req.URL())
	if err != nil {
		return "", "", err
	}
	ws, err := remotecommand.NewWebSocketExecutor(env.Config, "GET", req.URL().String())
	if err != nil {
		return "", "", err
	}
	exec, err := remotecommand.NewFallbackExecutor(ws, spdy, httpstream.IsUpgradeFailure)
	if err != nil {
		return "", "", err
	}
	var out, errOut bytes.Buffer
	opts := remotecommand.StreamOptions{Stdout: &out, Stderr: &errOut}
	if stdin != "" {
		opts.Stdin = strings.NewReader(stdin)
	}
	ctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	begin := time.Now()
	err = exec.StreamWithContext(ctx, opts)
	t.Logf("exec %q took %s", cmd, time.Since(begin).Round(time.Millisecond))
	return out.String(), errOut.String(), err
}

func condition(p *corev1.Pod, t corev1.PodConditionType) corev1.ConditionStatus {
	for _, c := range p.Status.Conditions {
		if c.Type == t {
			return c.Status
		}
	}
	return ""
}

// A Secret volume follows its Secret while the pod runs, as the kubelet's
// sync does (every podrunner.VolumeSync here): a changed key is rewritten in
// the mounted folder, a removed key disappears, a new one appears — what a
// manager reloading its rotated webhook certificate from disk relies on.
func TestSecretVolumeFollowsItsSecret(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	r, ns := start(t)
	c := env.Client
	sec := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "cert"},
		StringData: map[string]string{"tls.crt": "one", "old.key": "going"}}
	g.Expect(c.Create(ctx, sec)).To(Succeed())
	p := pod(ns, r.NodeName, "reader", `while :; do sleep 0.2; done`)
	p.Spec.Volumes = []corev1.Volume{{Name: "cert", VolumeSource: corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{
		SecretName: "cert", DefaultMode: ptr.To[int32](0o440)}}}}
	p.Spec.Containers[0].VolumeMounts = []corev1.VolumeMount{{Name: "cert", MountPath: "/etc/cert", ReadOnly: true}}
	g.Expect(c.Create(ctx, p)).To(Succeed())
	g.Eventually(func(g Gomega) {
		got := &corev1.Pod{}
		g.Expect(c.Get(ctx, client.ObjectKeyFromObject(p), got)).To(Succeed())
		g.Expect(got.Status.Phase).To(Equal(corev1.PodRunning))
	}, 2*time.Minute, 200*time.Millisecond).Should(Succeed())
	read := func() (string, error) {
		out, _, err := execIn(ctx, t, ns, "reader", "", "sh", "-c", `echo "$(ls /etc/cert | tr '\n' ,) $(cat /etc/cert/tls.crt) $(stat -c %a /etc/cert/tls.crt)"`)
		return strings.TrimSpace(out), err
	}
	g.Expect(read()).To(Equal("old.key,tls.crt, one 440"))

	g.Expect(c.Get(ctx, client.ObjectKeyFromObject(sec), sec)).To(Succeed())
	sec.Data = map[string][]byte{"tls.crt": []byte("two"), "new.key": []byte("came")}
	g.Expect(c.Update(ctx, sec)).To(Succeed())
	changed := time.Now()
	g.Eventually(read).WithTimeout(3 * podrunner.VolumeSync).WithPolling(time.Second).Should(Equal("new.key,tls.crt, two 440"))
	t.Logf("the running pod saw the changed Secret %s after the update", time.Since(changed).Round(100*time.Millisecond))
}
