package controller_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
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
// cannot work: with a segment age, a check interval or a slot limit out
// of range; the CRD says so before anything is created. PostgreSQL is
// admitted (its slot has a watchdog: TestPointInTimeChecksTheArchive), and
// so is encryption (TestPointInTimeEncryptedArchiver).
func TestPointInTimeAdmission(t *testing.T) {
	ns := newNamespace(t)
	for name, tc := range map[string]struct {
		mutate func(*backupv1.BackupJob)
		want   string
	}{
		"retained WAL below a few segments": {func(b *backupv1.BackupJob) {
			b.Spec.Database.Engine, b.Spec.Database.Port = cairnv1.PostgresEngine, 5432
			b.Spec.PointInTime.MaxRetainedWAL = new(resource.MustParse("64Mi"))
		}, "at least 256Mi"},
		"check every 10s": {func(b *backupv1.BackupJob) {
			b.Spec.PointInTime.CheckInterval = &metav1.Duration{Duration: 10 * time.Second}
		}, "between 1m and 1h"},
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

// archiveCheckJob waits for bj's n-th archive-status Job.
func archiveCheckJob(g Gomega, bj *backupv1.BackupJob, n int) *batchv1.Job {
	job := &batchv1.Job{}
	g.Eventually(func() error {
		return env.Client.Get(context.Background(), client.ObjectKey{Namespace: bj.Namespace, Name: fmt.Sprintf("%s-archive-check-%d", bj.Name, n)}, job)
	}).WithTimeout(30 * time.Second).Should(Succeed())
	return job
}

// TestPointInTimeChecksTheArchive: a PostgreSQL BackupJob with
// point-in-time gets an archiver that carries the slot's limit and one
// archive-status Job at a time (the operator's watchdog: the slot is
// dropped past spec.pointInTime.maxRetainedWAL even while the archiver is
// down), restricted, with the database and store by Secret reference, not
// a backup run. Its report becomes status.pointInTime (check, gaps,
// latest, segments) and the retained-WAL series; a dropped slot turns
// PointInTimeReady False/SlotDropped; the Job is deleted once recorded,
// and the next one waits for the interval. A failed check says why (MySQL:
// no slot, no limit).
func TestPointInTimeChecksTheArchive(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	ns := newNamespace(t)
	b := backupJob(ns, "pg")
	b.Spec.PointInTime = &backupv1.PointInTimeSpec{MaxRetainedWAL: new(resource.MustParse("1Gi")), CheckInterval: &metav1.Duration{Duration: time.Hour}}
	bj := create(t, b)
	key := client.ObjectKeyFromObject(bj)

	var dep *appsv1.Deployment
	g.Eventually(func(g Gomega) { dep = archiverOf(g, bj) }).WithTimeout(30 * time.Second).Should(Succeed())
	g.Expect(envFor(dep.Spec.Template.Spec.Containers[0])[contract.EnvArchiveMaxRetainedWALBytes].Value).To(Equal("1073741824"))
	g.Eventually(func() error { // one ready replica
		d := archiverOf(g, bj)
		d.Status = appsv1.DeploymentStatus{ObservedGeneration: d.Generation, Replicas: 1, UpdatedReplicas: 1, ReadyReplicas: 1, AvailableReplicas: 1}
		return env.Client.Status().Update(ctx, d)
	}).WithTimeout(10 * time.Second).Should(Succeed())

	job := archiveCheckJob(g, bj, 1)
	g.Expect(metav1.IsControlledBy(job, get(g, key))).To(BeTrue())
	g.Expect(job.Labels[backupv1.RunKindLabel]).To(Equal(backupv1.RunKindArchiveCheck))
	g.Expect(*job.Spec.BackoffLimit).To(BeZero(), "the next check is the retry")
	pod := job.Spec.Template.Spec
	g.Expect(*pod.AutomountServiceAccountToken).To(BeFalse())
	c := pod.Containers[0]
	g.Expect(c.Args).To(Equal([]string{contract.CommandArchiveStatus}))
	g.Expect(*c.SecurityContext.ReadOnlyRootFilesystem).To(BeTrue())
	e := envFor(c)
	g.Expect(e[contract.EnvArchiveMaxRetainedWALBytes].Value).To(Equal("1073741824"))
	g.Expect(e[contract.EnvBackupJob].Value).To(Equal(ns + "/pg"))
	g.Expect(e[contract.EnvDBPassword].ValueFrom.SecretKeyRef.Name).To(Equal("orders-db-credentials"))
	g.Expect(e).NotTo(HaveKey(contract.EnvRetentionDays), "a check prunes nothing")
	g.Expect(e).NotTo(HaveKey(contract.EnvPointInTime))

	terminate(t, job, true, `{"command":"archive-status","backupJob":"`+ns+`/pg","engine":"postgres","dir":"/x","segments":12,"oldest":"000000010000000000000003","newest":"00000001000000000000000E",`+
		`"latestCovered":"2026-12-05T10:05:07Z","slot":"cairn_pitr_x","slotExists":false,"retainedWALBytes":1200000000,"maxRetainedWALBytes":1073741824,"slotDropped":true,"maxSlotWALKeepSize":"-1"}`)
	g.Eventually(func(g Gomega) {
		got := get(g, key)
		st := got.Status.PointInTime
		g.Expect(st.Check).NotTo(BeNil())
		g.Expect(st.Check.Checks).To(BeEquivalentTo(1))
		g.Expect(st.Check.Slot).To(Equal("cairn_pitr_x"))
		g.Expect(st.Check.RetainedWALBytes).To(BeEquivalentTo(1200000000))
		g.Expect(st.Check.SlotDroppedTime).NotTo(BeNil())
		g.Expect(st.Check.MaxSlotWALKeepSize).To(Equal("-1"))
		g.Expect(st.Segments).To(BeEquivalentTo(12))
		g.Expect(st.LastSegment).To(Equal("00000001000000000000000E"))
		g.Expect(st.Latest.UTC().Format(time.RFC3339)).To(Equal("2026-12-05T10:05:07Z"))
		g.Expect(got.Status.LastBackupTime).To(BeNil(), "a check is not a backup run")
		c := pitReady(g, key)
		g.Expect(c.Status).To(Equal(metav1.ConditionFalse))
		g.Expect(c.Reason).To(Equal(backupv1.SlotDroppedReason))
		g.Expect(c.Message).To(ContainSubstring("cairn_pitr_x"))
		g.Expect(gauge(g, "cairn_backupjob_point_in_time_retained_wal_bytes", ns, "pg")).To(BeEquivalentTo(1200000000))
		// Recorded, so deleted.
		err := env.Client.Get(ctx, client.ObjectKeyFromObject(job), &batchv1.Job{})
		g.Expect(apierrors.IsNotFound(err)).To(BeTrue(), "check Job still there: %v", err)
	}).WithTimeout(30 * time.Second).Should(Succeed())
	// The next check waits for the interval (an hour here).
	g.Consistently(func() bool {
		err := env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: "pg-archive-check-2"}, &batchv1.Job{})
		return apierrors.IsNotFound(err)
	}).WithTimeout(3 * time.Second).Should(BeTrue())

	// A backup after the drop starts a new window: the slot's drop no
	// longer stands in the way (the archiver is ready).
	res := fmt.Sprintf(`{"artifact":"cairn/%s/pg/b1.pgbase.tar.zst","size":2048,"checksum":"sha256:%064x","start":"2026-12-05T10:00:00Z","end":"2026-12-05T10:01:00Z","durationSeconds":60,"engine":"postgres",`+
		`"pointInTime":{"earliest":"2026-12-05T10:01:00Z","latest":"2026-12-05T10:05:07Z","lastSegment":"00000001000000000000000E","segments":12}}`, ns, 7)
	finishRunAt(t, bj, "pg-1001", true, res, metav1.NewTime(time.Now().Add(time.Minute)))
	g.Eventually(func(g Gomega) {
		c := pitReady(g, key)
		g.Expect(c.Reason).To(Equal(backupv1.ArchivingReason))
		g.Expect(c.Status).To(Equal(metav1.ConditionTrue))
	}).WithTimeout(30 * time.Second).Should(Succeed())

	// MySQL: no slot, no limit; a failed check says why.
	m := mysqlBackupJob(ns, "shop")
	m.Spec.PointInTime = &backupv1.PointInTimeSpec{}
	mj := create(t, m)
	mjob := archiveCheckJob(g, mj, 1)
	g.Expect(envFor(mjob.Spec.Template.Spec.Containers[0])).NotTo(HaveKey(contract.EnvArchiveMaxRetainedWALBytes))
	g.Expect(envFor(archiverOf(g, mj).Spec.Template.Spec.Containers[0])).NotTo(HaveKey(contract.EnvArchiveMaxRetainedWALBytes))
	terminate(t, mjob, false, `{"error":"archive-status failed: the store is unreachable","code":""}`)
	g.Eventually(func(g Gomega) {
		chk := get(g, client.ObjectKeyFromObject(mj)).Status.PointInTime.Check
		g.Expect(chk).NotTo(BeNil())
		g.Expect(chk.Checks).To(BeEquivalentTo(1))
		g.Expect(chk.Message).To(ContainSubstring("the store is unreachable"))
		g.Expect(gauge(g, "cairn_backupjob_point_in_time_retained_wal_bytes", ns, "shop")).To(BeZero(), "no series for MySQL")
	}).WithTimeout(30 * time.Second).Should(Succeed())
}

// releaseJob waits for bj's slot release Job and checks what it asks.
func releaseJob(g Gomega, bj *backupv1.BackupJob) *batchv1.Job {
	job := &batchv1.Job{}
	g.Eventually(func() error {
		return env.Client.Get(context.Background(), client.ObjectKey{Namespace: bj.Namespace, Name: bj.Name + "-release-slot"}, job)
	}).WithTimeout(30 * time.Second).Should(Succeed())
	c := job.Spec.Template.Spec.Containers[0]
	g.Expect(c.Args).To(Equal([]string{contract.CommandArchiveStatus}))
	g.Expect(envFor(c)[contract.EnvArchiveReleaseSlot].Value).To(Equal("true"))
	return job
}

// TestPointInTimeReleasesTheSlot: a PostgreSQL archiver's replication slot
// never outlives it. Point-in-time turned off: the archiver goes, then one
// release Job drops the slot (status.pointInTime stays until it
// succeeded; a failed release is kept, then run again). The BackupJob
// deleted (deletionPolicy Retain): its finalizer stays until the release
// succeeded.
func TestPointInTimeReleasesTheSlot(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	ns := newNamespace(t)
	released := func(ns, name string) string {
		return `{"command":"archive-status","backupJob":"` + ns + `/` + name + `","engine":"postgres","dir":"/x","slot":"cairn_pitr_y","retainedWALBytes":4096,"slotReleased":true}`
	}

	b := backupJob(ns, "off")
	b.Spec.PointInTime = &backupv1.PointInTimeSpec{}
	bj := create(t, b)
	key := client.ObjectKeyFromObject(bj)
	g.Eventually(func(g Gomega) { archiverOf(g, bj); g.Expect(get(g, key).Status.PointInTime).NotTo(BeNil()) }).WithTimeout(30 * time.Second).Should(Succeed())
	update(t, key, func(b *backupv1.BackupJob) { b.Spec.PointInTime = nil })
	job := releaseJob(g, bj)
	g.Expect(metav1.IsControlledBy(job, get(g, key))).To(BeTrue())
	err := env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: "off-archiver"}, &appsv1.Deployment{})
	g.Expect(apierrors.IsNotFound(err)).To(BeTrue(), "the release runs after the archiver is gone: %v", err)
	g.Expect(get(g, key).Status.PointInTime).NotTo(BeNil(), "kept until the slot is released")
	// A failed release is kept until its retry is due: no new Job at once.
	terminate(t, job, false, `{"error":"archive-status failed: the source is unreachable","code":""}`)
	g.Consistently(func(g Gomega) {
		cur := &batchv1.Job{}
		g.Expect(env.Client.Get(ctx, client.ObjectKeyFromObject(job), cur)).To(Succeed())
		g.Expect(cur.UID).To(Equal(job.UID))
		g.Expect(get(g, key).Status.PointInTime).NotTo(BeNil())
	}).WithTimeout(3 * time.Second).Should(Succeed())
	g.Expect(env.Client.Delete(ctx, job, client.PropagationPolicy(metav1.DeletePropagationBackground))).To(Succeed()) // the retry, sooner
	// No garbage collector here: its pod goes by hand.
	g.Expect(env.Client.Delete(ctx, &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: job.Name + "-pod"}})).To(Succeed())
	job = releaseJob(g, bj)
	terminate(t, job, true, released(ns, "off"))
	g.Eventually(func(g Gomega) {
		g.Expect(get(g, key).Status.PointInTime).To(BeNil())
		err := env.Client.Get(ctx, client.ObjectKeyFromObject(job), &batchv1.Job{})
		g.Expect(apierrors.IsNotFound(err)).To(BeTrue(), "release Job still there: %v", err)
	}).WithTimeout(30 * time.Second).Should(Succeed())

	d := backupJob(ns, "deleted")
	d.Spec.PointInTime = &backupv1.PointInTimeSpec{}
	dj := create(t, d)
	dkey := client.ObjectKeyFromObject(dj)
	g.Eventually(func(g Gomega) { archiverOf(g, dj); g.Expect(get(g, dkey).Finalizers).NotTo(BeEmpty()) }).WithTimeout(30 * time.Second).Should(Succeed())
	g.Expect(env.Client.Delete(ctx, dj)).To(Succeed())
	job = releaseJob(g, dj)
	g.Consistently(func(g Gomega) { get(g, dkey) }).WithTimeout(2 * time.Second).Should(Succeed())
	terminate(t, job, true, released(ns, "deleted"))
	g.Eventually(func() bool {
		return apierrors.IsNotFound(env.Client.Get(ctx, dkey, &backupv1.BackupJob{}))
	}).WithTimeout(30*time.Second).Should(BeTrue(), "the BackupJob is gone once its slot is released")
}
