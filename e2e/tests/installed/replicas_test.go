package installed_test

import (
	"fmt"
	"slices"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	backupv1 "cairn.dev/apis/backup/v1"
	"cairn.dev/e2e/fixtures"
	"cairn.dev/e2e/install"
)

// operator under test: its Lease, webhooks and children are what the tests
// read.
const operator = "backup"

// runningPods returns the names of the operator's running pods once its
// Deployment has rolled out (two replicas).
func runningPods(t *testing.T, g Gomega) []string {
	t.Helper()
	g.Expect(install.WaitDeployment(ctx, k8s, operator, 3*time.Minute)).To(Succeed())
	var names []string
	// A pod the ReplicaSet replaced may still be on its way out.
	g.Eventually(func() ([]string, error) {
		pods, err := install.OperatorPods(ctx, k8s, operator)
		names = nil
		for _, p := range pods {
			names = append(names, p.Name)
		}
		return names, err
	}).WithTimeout(time.Minute).WithPolling(200*time.Millisecond).Should(HaveLen(2), "two replicas as shipped")
	return names
}

// running says whether pod is one of the operator's running pods.
func running(g Gomega, pod string) bool {
	pods, err := install.OperatorPods(ctx, k8s, operator)
	g.Expect(err).NotTo(HaveOccurred())
	for _, p := range pods {
		if p.Name == pod {
			return true
		}
	}
	return false
}

// leader waits until one of pods holds the Lease and returns it.
func leader(g Gomega, pods []string) string {
	var holder string
	g.Eventually(func() (string, error) {
		var err error
		holder, err = install.LeaderPod(ctx, k8s, operator)
		return holder, err
	}).WithTimeout(time.Minute).WithPolling(200 * time.Millisecond).Should(BeElementOf(pods))
	return holder
}

// leaderAndStandby returns the operator's two running pods, the Lease's
// holder first.
func leaderAndStandby(t *testing.T, g Gomega) (string, string) {
	pods := runningPods(t, g)
	old := leader(g, pods)
	if pods[0] == old {
		return old, pods[1]
	}
	return old, pods[0]
}

// The leader's container is SIGKILLed: the standby, already running, takes
// the Lease over (it waits for the dead leader's lease to expire, 15 s as
// shipped), and the ReplicaSet brings the Deployment back to two ready
// replicas.
func TestLeaderKilledLeaseMoves(t *testing.T) {
	g := NewWithT(t)
	old, standby := leaderAndStandby(t, g)
	killed := time.Now()
	g.Expect(env.Cluster.Pods.Kill(install.Namespace, old, "manager")).To(Succeed())
	var holder string
	g.Eventually(func() bool {
		holder, _ = install.LeaderPod(ctx, k8s, operator)
		return holder != "" && holder != old && running(g, holder)
	}).WithTimeout(90*time.Second).WithPolling(200*time.Millisecond).Should(BeTrue(), "a running replica takes the Lease over from %s", old)
	g.Expect(running(g, old)).To(BeFalse(), "the killed pod ended")
	t.Logf("the Lease moved from %s to %s (the standby before the kill: %s) %s after the kill", old, holder, standby,
		time.Since(killed).Round(100*time.Millisecond))
	g.Expect(install.WaitDeployment(ctx, k8s, operator, 3*time.Minute)).To(Succeed())
}

// endpointIPs lists the ready addresses of the operator's webhook Service.
func endpointIPs(g Gomega) []string {
	l := &discoveryv1.EndpointSliceList{}
	g.Expect(k8s.List(ctx, l, client.InNamespace(install.Namespace),
		client.MatchingLabels{discoveryv1.LabelServiceName: install.WebhookServiceName(operator)})).To(Succeed())
	var ips []string
	for _, s := range l.Items {
		for _, e := range s.Endpoints {
			if e.Conditions.Ready == nil || *e.Conditions.Ready {
				ips = append(ips, e.Addresses...)
			}
		}
	}
	slices.Sort(ips)
	return ips
}

// With the leader's container dead and no leader elected yet, the webhooks
// still answer — through the standby, the only ready endpoint of the
// webhook Service: a valid BackupJob is admitted (defaulted: the finalizer
// only the defaulting webhook adds) and an invalid one is refused with the
// validating webhook's message, each of ten times.
func TestWebhookAnswersThroughStandby(t *testing.T) {
	g := NewWithT(t)
	old, standby := leaderAndStandby(t, g)
	ns := fixtures.Namespace(t, k8s, "e2e-installed-")
	g.Expect(env.Cluster.Pods.Kill(install.Namespace, old, "manager")).To(Succeed())
	// The dead pod leaves the Service's endpoints (its phase is Failed).
	g.Eventually(func() int { return len(endpointIPs(g)) }).WithTimeout(30 * time.Second).WithPolling(100 * time.Millisecond).Should(Equal(1))
	only := endpointIPs(g)
	held, err := install.LeaderPod(ctx, k8s, operator)
	g.Expect(err).NotTo(HaveOccurred())
	sp := &corev1.Pod{}
	g.Expect(k8s.Get(ctx, client.ObjectKey{Namespace: install.Namespace, Name: standby}, sp)).To(Succeed())
	t.Logf("one endpoint left (%v; the standby %s is %s); the Lease still names %s", only, standby, sp.Status.PodIP, held)
	for i := range 10 {
		bj := fixtures.BackupJob(ns, fmt.Sprintf("db-%d", i), fixtures.Yearly, "db.example", 1)
		g.Expect(k8s.Create(ctx, bj)).To(Succeed(), "admitted while one replica is dead")
		g.Expect(bj.Finalizers).NotTo(BeEmpty(), "defaulted by the webhook (it adds the cleanup finalizer)")
		bad := fixtures.BackupJob(ns, fmt.Sprintf("bad-%d", i), fixtures.Yearly, "db.example", 1)
		bad.Spec.TimeZone = "Mars/Olympus_Mons"
		err := k8s.Create(ctx, bad)
		g.Expect(err).To(HaveOccurred())
		g.Expect(err.Error()).To(ContainSubstring("admission webhook"), "refused by the validating webhook")
	}
	g.Expect(install.WaitDeployment(ctx, k8s, operator, 3*time.Minute)).To(Succeed())
}

// jobsOf lists the Jobs of BackupJob name in ns.
func jobsOf(g Gomega, ns, name string) []batchv1.Job {
	l := &batchv1.JobList{}
	g.Expect(k8s.List(ctx, l, client.InNamespace(ns), client.MatchingLabels{fixtures.BackupJobLabel: name})).To(Succeed())
	return l.Items
}

func cronJobsOf(g Gomega, ns, name string) int {
	l := &batchv1.CronJobList{}
	g.Expect(k8s.List(ctx, l, client.InNamespace(ns), client.MatchingLabels{fixtures.BackupJobLabel: name})).To(Succeed())
	return len(l.Items)
}

// `kubectl rollout restart` of the operator while it works: BackupJobs are
// created and run-now requests made before and during the rollout. Once the
// new ReplicaSet is rolled out every BackupJob has exactly one CronJob and
// one Job per request — none lost, none duplicated — and keeps that.
func TestRollingRestartLosesNothing(t *testing.T) {
	g := NewWithT(t)
	runningPods(t, g)
	ns := fixtures.Namespace(t, k8s, "e2e-rollout-")
	const n = 10
	var bjs []*backupv1.BackupJob
	for i := range n {
		bj := fixtures.BackupJob(ns, fmt.Sprintf("db-%02d", i), fixtures.Yearly, "db.example", 0)
		bj.Annotations = map[string]string{backupv1.RunNowAnnotation: "before"}
		g.Expect(k8s.Create(ctx, bj)).To(Succeed())
		bjs = append(bjs, bj)
	}
	dep := &appsv1.Deployment{}
	key := client.ObjectKey{Namespace: install.Namespace, Name: install.DeploymentName(operator)}
	g.Expect(k8s.Get(ctx, key, dep)).To(Succeed())
	patch := client.MergeFrom(dep.DeepCopy())
	if dep.Spec.Template.Annotations == nil {
		dep.Spec.Template.Annotations = map[string]string{}
	}
	dep.Spec.Template.Annotations["kubectl.kubernetes.io/restartedAt"] = time.Now().Format(time.RFC3339)
	g.Expect(k8s.Patch(ctx, dep, patch)).To(Succeed())
	start := time.Now()
	// Rounds of requests during the rollout: each BackupJob's request is
	// answered (its Job created) before the next one is made — a request
	// overwritten before the operator read it would be skipped by design.
	problems := func(requests int) []string {
		var out []string
		for _, bj := range bjs {
			if c := cronJobsOf(g, ns, bj.Name); c != 1 {
				out = append(out, fmt.Sprintf("%s: %d CronJobs", bj.Name, c))
			}
			if js := jobsOf(g, ns, bj.Name); len(js) != requests {
				out = append(out, fmt.Sprintf("%s: %d Jobs for %d requests", bj.Name, len(js), requests))
			}
		}
		return out
	}
	requests := 1
	for round := 0; ; round++ {
		g.Eventually(func() []string { return problems(requests) }).WithTimeout(2*time.Minute).WithPolling(200*time.Millisecond).
			Should(BeEmpty(), "every request of round %d answered", round)
		if err := install.WaitDeployment(ctx, k8s, operator, time.Second); err == nil && round > 0 {
			break
		}
		g.Expect(time.Since(start)).To(BeNumerically("<", 5*time.Minute), "the rollout ends")
		id := fmt.Sprintf("during-%d", round)
		for _, bj := range bjs {
			fixtures.SetRunNow(g, k8s, bj, id)
		}
		requests++
	}
	t.Logf("rollout done %s after the restart; %d run-now request(s) per BackupJob", time.Since(start).Round(100*time.Millisecond), requests)
	g.Consistently(func() []string { return problems(requests) }).WithTimeout(10 * time.Second).WithPolling(time.Second).Should(BeEmpty())
}
