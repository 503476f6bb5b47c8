package faults_test

import (
	"fmt"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	backupv1 "cairn.dev/apis/backup/v1"
)

// Point-in-time archivers under an operator SIGKILLed mid-work: 12
// BackupJobs with spec.pointInTime, the operator throttled to 5 API
// requests/s and killed once it created the first archivers. A new process
// converges every BackupJob to exactly one archiver Deployment it controls,
// one replica, Recreate (never two readers of one change log), and leaves
// each with one ReplicaSet: the restarted operator rendered the same pod,
// so no archiver was rolled (which would stop and start its reader).
func TestOperatorKilledLeavesOneArchiverEach(t *testing.T) {
	g := NewWithT(t)
	const n = 12
	slow := startBackup(t, "-slow-pit", append([]string{"--kube-api-qps=5", "--kube-api-burst=5"}, shortLease...)...)
	ns := namespace(t)
	var bjs []*backupv1.BackupJob
	for i := range n {
		bj := backupJob(ns, fmt.Sprintf("pit-%02d", i), yearly)
		bj.Spec.PointInTime = &backupv1.PointInTimeSpec{}
		g.Expect(k8s.Create(ctx, bj)).To(Succeed())
		bjs = append(bjs, bj)
	}
	deployments := func(g Gomega) []appsv1.Deployment {
		l := &appsv1.DeploymentList{}
		g.Expect(k8s.List(ctx, l, client.InNamespace(ns))).To(Succeed())
		return l.Items
	}
	g.Eventually(func(g Gomega) int { return len(deployments(g)) }).WithTimeout(2 * time.Minute).WithPolling(20 * time.Millisecond).Should(BeNumerically(">=", 2))
	g.Expect(slow.Kill()).To(Succeed())
	atKill := len(deployments(g))
	t.Logf("SIGKILL with %d archivers for %d BackupJobs", atKill, n)
	g.Expect(atKill).To(BeNumerically("<", n), "the kill landed mid-work")

	fresh := startBackup(t, "-fresh-pit", shortLease...)
	oneEach := func(g Gomega) {
		deps := deployments(g)
		g.Expect(deps).To(HaveLen(n))
		byOwner := map[string]int{}
		for _, d := range deps {
			owner := metav1.GetControllerOf(&d)
			g.Expect(owner).NotTo(BeNil(), "archiver %s has no controller", d.Name)
			g.Expect(owner.Kind).To(Equal("BackupJob"))
			g.Expect(d.Name).To(Equal(owner.Name + "-archiver"))
			g.Expect(*d.Spec.Replicas).To(BeEquivalentTo(1))
			g.Expect(d.Spec.Strategy.Type).To(Equal(appsv1.RecreateDeploymentStrategyType))
			byOwner[owner.Name]++
			rs := &appsv1.ReplicaSetList{}
			g.Expect(k8s.List(ctx, rs, client.InNamespace(ns), client.MatchingLabels(d.Spec.Selector.MatchLabels))).To(Succeed())
			g.Expect(rs.Items).To(HaveLen(1), "archiver %s was rolled: %d ReplicaSets", d.Name, len(rs.Items))
		}
		for _, bj := range bjs {
			g.Expect(byOwner).To(HaveKeyWithValue(bj.Name, 1))
		}
	}
	g.Eventually(oneEach).WithTimeout(3 * time.Minute).WithPolling(500 * time.Millisecond).Should(Succeed())
	g.Consistently(oneEach).WithTimeout(5 * time.Second).WithPolling(time.Second).Should(Succeed())
	g.Expect(acquiredLease(fresh)).To(BeTrue())
}
