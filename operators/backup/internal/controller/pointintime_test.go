package controller_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"cairn.dev/agent/contract"
	backupv1 "cairn.dev/apis/backup/v1"
	cairnv1 "cairn.dev/apis/meta/v1"
)

func mysqlBackupJob(ns, name string) *backupv1.BackupJob {
	b := backupJob(ns, name)
	b.Spec.Database.Engine, b.Spec.Database.Port = cairnv1.MySQLEngine, 3306
	return b
}

func archiverOf(g Gomega, bj *backupv1.BackupJob) *appsv1.Deployment {
	dep := &appsv1.Deployment{}
	g.Expect(env.Client.Get(context.Background(), client.ObjectKey{Namespace: bj.Namespace, Name: bj.Name + "-archiver"}, dep)).To(Succeed())
	return dep
}

func pitReady(g Gomega, key client.ObjectKey) *metav1.Condition {
	c := meta.FindStatusCondition(get(g, key).Status.Conditions, backupv1.PointInTimeReadyCondition)
	g.Expect(c).NotTo(BeNil())
	return c
}

// TestPointInTimeRunsOneArchiver: spec.pointInTime gives a MySQL
// BackupJob one archiver it controls — `agent archive` with the
// BackupJob's database and store by Secret reference, one replica,
// Recreate, a restricted pod with its readiness probe — and its scheduled
// runs record their binary log position. PointInTimeReady follows the
// archiver's readiness, then the gaps a backup reports; the window of a
// backup's result is in status.pointInTime. Unsetting pointInTime removes
// the archiver and the condition.
func TestPointInTimeRunsOneArchiver(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	ns := newNamespace(t)
	b := mysqlBackupJob(ns, "shop")
	b.Spec.PointInTime = &backupv1.PointInTimeSpec{MaxSegmentAge: &metav1.Duration{Duration: 30 * time.Second}}
	bj := create(t, b)
	key := client.ObjectKeyFromObject(bj)

	var dep *appsv1.Deployment
	g.Eventually(func(g Gomega) { dep = archiverOf(g, bj) }).WithTimeout(30 * time.Second).Should(Succeed())
	g.Expect(metav1.IsControlledBy(dep, get(g, key))).To(BeTrue())
	g.Expect(*dep.Spec.Replicas).To(BeEquivalentTo(1))
	g.Expect(dep.Spec.Strategy.Type).To(Equal(appsv1.RecreateDeploymentStrategyType), "never two readers of one log")
	pod := dep.Spec.Template.Spec
	g.Expect(pod.RestartPolicy).To(Equal(corev1.RestartPolicyAlways))
	g.Expect(*pod.AutomountServiceAccountToken).To(BeFalse())
	g.Expect(*pod.SecurityContext.RunAsNonRoot).To(BeTrue())
	c := pod.Containers[0]
	g.Expect(c.Args).To(Equal([]string{contract.CommandArchive}))
	g.Expect(*c.SecurityContext.ReadOnlyRootFilesystem).To(BeTrue())
	g.Expect(c.ReadinessProbe.HTTPGet.Path).To(Equal(contract.ArchiverReadyPath))
	g.Expect(c.ReadinessProbe.HTTPGet.Port.IntValue()).To(Equal(contract.ArchiverHealthPort))
	e := envFor(c)
	g.Expect(e[contract.EnvMaxSegmentAge].Value).To(Equal("30s"))
	g.Expect(e[contract.EnvMaxLag].Value).To(Equal("5m0s"))
	g.Expect(e[contract.EnvBackupJob].Value).To(Equal(ns + "/shop"))
	g.Expect(e[contract.EnvDBPassword].ValueFrom.SecretKeyRef.Name).To(Equal("orders-db-credentials"))
	g.Expect(e[contract.EnvDBPassword].Value).To(BeEmpty())
	g.Expect(e).NotTo(HaveKey(contract.EnvPointInTime))
	g.Expect(e).NotTo(HaveKey(contract.EnvRetentionDays), "the archiver prunes nothing")
	// The scheduled runs are bases.
	g.Eventually(func(g Gomega) {
		g.Expect(envFor(cronJob(g, key).Spec.JobTemplate.Spec.Template.Spec.Containers[0])[contract.EnvPointInTime].Value).To(Equal("true"))
	}).WithTimeout(30 * time.Second).Should(Succeed())

	// Not ready until the archiver is.
	g.Eventually(func(g Gomega) {
		c := pitReady(g, key)
		g.Expect(c.Status).To(Equal(metav1.ConditionFalse))
		g.Expect(c.Reason).To(Equal(backupv1.ArchiverNotReadyReason))
	}).WithTimeout(30 * time.Second).Should(Succeed())
	// Play the Deployment controller: one ready replica.
	g.Eventually(func() error {
		d := archiverOf(g, bj)
		d.Status = appsv1.DeploymentStatus{ObservedGeneration: d.Generation, Replicas: 1, UpdatedReplicas: 1, ReadyReplicas: 1, AvailableReplicas: 1}
		return env.Client.Status().Update(ctx, d)
	}).WithTimeout(10 * time.Second).Should(Succeed())
	g.Eventually(func(g Gomega) {
		c := pitReady(g, key)
		g.Expect(c.Status).To(Equal(metav1.ConditionTrue))
		g.Expect(c.Reason).To(Equal(backupv1.ArchivingReason))
		g.Expect(get(g, key).Status.PointInTime.Archiver).To(Equal("shop-archiver"))
		g.Expect(gauge(g, "cairn_backupjob_point_in_time_ready", ns, "shop")).To(BeEquivalentTo(1))
	}).WithTimeout(30 * time.Second).Should(Succeed())

	// A backup reports the window, and a gap.
	res := fmt.Sprintf(`{"artifact":"cairn/%s/shop/b1.sql.zst","size":2048,"checksum":"sha256:%064x","start":"2026-12-05T10:00:00Z","end":"2026-12-05T10:01:00Z","durationSeconds":60,"engine":"mysql",`+
		`"pointInTime":{"earliest":"2026-12-04T10:01:00Z","latest":"2026-12-05T10:05:07Z","lastSegment":"mysql-bin.000042","segments":40,"gaps":["mysql-bin.000017 is missing (the server continued in it after mysql-bin.000016)"]}}`, ns, 7)
	finishRun(t, bj, "shop-1001", true, res)
	g.Eventually(func(g Gomega) {
		st := get(g, key).Status.PointInTime
		g.Expect(st).NotTo(BeNil())
		g.Expect(st.Latest).NotTo(BeNil())
		g.Expect(st.Latest.UTC().Format(time.RFC3339)).To(Equal("2026-12-05T10:05:07Z"))
		g.Expect(st.Earliest.UTC().Format(time.RFC3339)).To(Equal("2026-12-04T10:01:00Z"))
		g.Expect(st.LastSegment).To(Equal("mysql-bin.000042"))
		g.Expect(st.Segments).To(BeEquivalentTo(40))
		c := pitReady(g, key)
		g.Expect(c.Status).To(Equal(metav1.ConditionFalse))
		g.Expect(c.Reason).To(Equal(backupv1.ArchiveGapReason))
		g.Expect(c.Message).To(ContainSubstring("mysql-bin.000017 is missing"))
		g.Expect(gauge(g, "cairn_backupjob_point_in_time_gaps", ns, "shop")).To(BeEquivalentTo(1))
		g.Expect(gauge(g, "cairn_backupjob_point_in_time_ready", ns, "shop")).To(BeZero())
	}).WithTimeout(30 * time.Second).Should(Succeed())
	// The backup itself is fine: Ready stays about the runs.
	g.Expect(meta.IsStatusConditionTrue(get(g, key).Status.Conditions, cairnv1.ReadyCondition)).To(BeTrue())

	// A hand edit of the archiver is reverted.
	g.Eventually(func() error {
		d := archiverOf(g, bj)
		d.Spec.Replicas = new(int32(2))
		return env.Client.Update(ctx, d)
	}).WithTimeout(10 * time.Second).Should(Succeed())
	g.Eventually(func(g Gomega) { g.Expect(*archiverOf(g, bj).Spec.Replicas).To(BeEquivalentTo(1)) }).WithTimeout(30 * time.Second).Should(Succeed())

	// Off: the archiver goes, and so do the condition and the window.
	update(t, key, func(b *backupv1.BackupJob) { b.Spec.PointInTime = nil })
	g.Eventually(func(g Gomega) {
		err := env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: "shop-archiver"}, &appsv1.Deployment{})
		g.Expect(apierrors.IsNotFound(err)).To(BeTrue(), "archiver still there: %v", err)
		got := get(g, key)
		g.Expect(meta.FindStatusCondition(got.Status.Conditions, backupv1.PointInTimeReadyCondition)).To(BeNil())
		g.Expect(got.Status.PointInTime).To(BeNil())
		g.Expect(envFor(cronJob(g, key).Spec.JobTemplate.Spec.Template.Spec.Containers[0])).NotTo(HaveKey(contract.EnvPointInTime))
	}).WithTimeout(30 * time.Second).Should(Succeed())
}

// TestPointInTimeAdmission: point-in-time recovery is refused where it
// cannot work: on PostgreSQL (not yet), and with a segment age out of
// range; the CRD says so before anything is created. (Beside encryption
// it is accepted: TestPointInTimeEncryptedArchiver.)
func TestPointInTimeAdmission(t *testing.T) {
	ns := newNamespace(t)
	for name, tc := range map[string]struct {
		mutate func(*backupv1.BackupJob)
		want   string
	}{
		"postgres": {func(b *backupv1.BackupJob) {
			b.Spec.Database.Engine, b.Spec.Database.Port = cairnv1.PostgresEngine, 5432
		}, "MySQL/MariaDB"},
		"segment age 1s": {func(b *backupv1.BackupJob) {
			b.Spec.PointInTime.MaxSegmentAge = &metav1.Duration{Duration: time.Second}
		}, "between 10s and 1h"},
		"lag below the segment age": {func(b *backupv1.BackupJob) {
			b.Spec.PointInTime.MaxSegmentAge = &metav1.Duration{Duration: 5 * time.Minute}
			b.Spec.PointInTime.MaxLag = &metav1.Duration{Duration: time.Minute}
		}, "at least maxSegmentAge"},
	} {
		b := mysqlBackupJob(ns, strings.ReplaceAll(name, " ", "-"))
		b.Spec.PointInTime = &backupv1.PointInTimeSpec{}
		tc.mutate(b)
		err := env.Client.Create(context.Background(), b)
		if !apierrors.IsInvalid(err) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v, want Invalid naming %q", name, err, tc.want)
		}
	}
}

// TestPointInTimeArchiverNameTaken: a Deployment named like the archiver
// that the BackupJob does not control is never adopted nor changed: the
// BackupJob stalls NotControlled, and PointInTimeReady says why.
func TestPointInTimeArchiverNameTaken(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	ns := newNamespace(t)
	labels := map[string]string{"app": "someone-else"}
	foreign := &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "shop-archiver"},
		Spec: appsv1.DeploymentSpec{Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "app", Image: "example.test/app:1"}}}}},
	}
	g.Expect(env.Client.Create(ctx, foreign)).To(Succeed())
	b := mysqlBackupJob(ns, "shop")
	b.Spec.PointInTime = &backupv1.PointInTimeSpec{}
	key := client.ObjectKeyFromObject(create(t, b))
	g.Eventually(func(g Gomega) {
		c := pitReady(g, key)
		g.Expect(c.Status).To(Equal(metav1.ConditionFalse))
		g.Expect(c.Reason).To(Equal(cairnv1.NotControlledReason))
		g.Expect(meta.IsStatusConditionTrue(get(g, key).Status.Conditions, cairnv1.StalledCondition)).To(BeTrue())
	}).WithTimeout(30 * time.Second).Should(Succeed())
	got := archiverOf(g, b)
	g.Expect(got.Spec.Template.Spec.Containers[0].Image).To(Equal("example.test/app:1"), "not changed")
	g.Expect(metav1.GetControllerOf(got)).To(BeNil(), "not adopted")
}
