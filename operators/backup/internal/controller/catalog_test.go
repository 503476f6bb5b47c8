package controller_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	backupv1 "cairn.dev/apis/backup/v1"
	"cairn.dev/libs/testing/testenv"
	"cairn.dev/operators/backup/internal/controller"
)

func listJobs(g Gomega, ns string) []batchv1.Job {
	return testenv.Jobs(g, env.Client, ns, client.MatchingLabels{controller.RunKindLabel: "list"})
}

// terminate plays the kubelet and the Job controller for job: its pod
// terminated with msg, the Job Complete (or Failed).
func terminate(t *testing.T, job *batchv1.Job, succeed bool, msg string) {
	t.Helper()
	g := NewWithT(t)
	ctx := context.Background()
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: job.Namespace, Name: job.Name + "-pod", Labels: map[string]string{}}, Spec: job.Spec.Template.Spec}
	for k, v := range job.Spec.Template.Labels {
		pod.Labels[k] = v
	}
	pod.Labels["batch.kubernetes.io/job-name"] = job.Name
	// As the Job controller makes it: controlled by its Job.
	pod.OwnerReferences = []metav1.OwnerReference{*metav1.NewControllerRef(job, batchv1.SchemeGroupVersion.WithKind("Job"))}
	g.Expect(env.Client.Create(ctx, pod)).To(Succeed())
	code := int32(0)
	if !succeed {
		code = 1
	}
	now := metav1.Now()
	pod.Status = corev1.PodStatus{Phase: corev1.PodSucceeded, ContainerStatuses: []corev1.ContainerStatus{{Name: "agent", Image: agentImage, ImageID: agentImage,
		State: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: code, Message: msg, StartedAt: now, FinishedAt: now, Reason: "Completed"}}}}}
	g.Expect(env.Client.Status().Update(ctx, pod)).To(Succeed())
	job.Status.StartTime = &now
	if succeed {
		completeJob(t, job)
		return
	}
	job.Status.Failed = 2
	job.Status.Conditions = []batchv1.JobCondition{
		{Type: batchv1.JobFailureTarget, Status: corev1.ConditionTrue, Reason: "BackoffLimitExceeded", LastTransitionTime: now},
		{Type: batchv1.JobFailed, Status: corev1.ConditionTrue, Reason: "BackoffLimitExceeded", Message: "Job has reached the specified backoff limit", LastTransitionTime: now},
	}
	g.Expect(env.Client.Status().Update(ctx, job)).To(Succeed())
}

// A list-catalog request runs exactly one `agent list` Job (the store's
// credentials reach its pod only, never the requester), records the report
// in status.catalog, deletes the Job, and is never answered twice; a
// failed listing says why.
func TestListCatalogAnswersEachRequestOnce(t *testing.T) {
	g := NewWithT(t)
	ns := newNamespace(t)
	bj := create(t, backupJob(ns, "orders"))
	key := client.ObjectKeyFromObject(bj)
	converged(t, key, backupv1.PhaseScheduled)
	annotate := func(v string) {
		update(t, key, func(bj *backupv1.BackupJob) {
			if bj.Annotations == nil {
				bj.Annotations = map[string]string{}
			}
			bj.Annotations[backupv1.ListCatalogAnnotation] = v
		})
	}

	annotate("req-1")
	var job batchv1.Job
	g.Eventually(func(g Gomega) {
		jobs := listJobs(g, ns)
		g.Expect(jobs).To(HaveLen(1))
		job = jobs[0]
	}).WithTimeout(30 * time.Second).Should(Succeed())
	c := job.Spec.Template.Spec.Containers[0]
	g.Expect(c.Args).To(Equal([]string{"list"}))
	vars := envFor(c)
	g.Expect(vars["CAIRN_BACKUPJOB"].Value).To(Equal(ns + "/orders"))
	g.Expect(vars).NotTo(HaveKey("CAIRN_DB_PASSWORD"), "a listing reads the store only")
	g.Expect(metav1.IsControlledBy(&job, get(g, key))).To(BeTrue())
	g.Expect(*job.Spec.BackoffLimit).To(Equal(int32(1)))

	report := fmt.Sprintf(`{"command":"list","backupJob":"%s/orders","count":40,"newest":"cairn/a2.pgdump.zst","artifacts":[`+
		`{"path":"cairn/a2.pgdump.zst","size":2048,"checksum":"sha256:%064x","end":"2026-12-05T02:00:00Z","engine":"postgres","tables":3,"rows":62000},`+
		`{"path":"cairn/a1.pgdump.zst","size":1024,"checksum":"sha256:%064x","end":"2026-12-04T02:00:00Z","engine":"postgres"}]}`, ns, 2, 1)
	terminate(t, &job, true, report)
	g.Eventually(func(g Gomega) {
		cat := get(g, key).Status.Catalog
		g.Expect(cat).NotTo(BeNil())
		g.Expect(cat.Request).To(Equal("req-1"))
	}).WithTimeout(30 * time.Second).Should(Succeed())
	cat := get(g, key).Status.Catalog
	g.Expect(cat.Message).To(BeEmpty())
	g.Expect(cat.Count).To(Equal(int32(40)))
	g.Expect(cat.Artifacts).To(HaveLen(2))
	g.Expect(cat.Artifacts[0].Path).To(Equal("cairn/a2.pgdump.zst"))
	g.Expect(cat.Artifacts[0].Tables).To(Equal(int32(3)))
	g.Expect(cat.Artifacts[0].Rows).To(Equal(int64(62000)))
	g.Expect(cat.Artifacts[0].Time.UTC().Format(time.RFC3339)).To(Equal("2026-12-05T02:00:00Z"))
	g.Expect(cat.Artifacts[1].Checksum).To(Equal(fmt.Sprintf("sha256:%064x", 1)))
	g.Eventually(func() bool {
		err := env.Client.Get(context.Background(), client.ObjectKeyFromObject(&job), &batchv1.Job{})
		return apierrors.IsNotFound(err)
	}).WithTimeout(30*time.Second).Should(BeTrue(), "the listing Job is deleted once read")
	// The same request is not answered again; a listing is no backup run.
	update(t, key, func(bj *backupv1.BackupJob) { bj.Annotations["unrelated"] = "1" })
	g.Consistently(func(g Gomega) { g.Expect(listJobs(g, ns)).To(BeEmpty()) }).WithTimeout(2 * time.Second).Should(Succeed())
	g.Expect(get(g, key).Status.LastRunName).To(BeEmpty())

	// A failed listing says why, in status.
	annotate("req-2")
	g.Eventually(func(g Gomega) {
		jobs := listJobs(g, ns)
		g.Expect(jobs).To(HaveLen(1))
		job = jobs[0]
	}).WithTimeout(30 * time.Second).Should(Succeed())
	terminate(t, &job, false, `{"error":"list failed: bucket \"backups\" does not exist"}`)
	g.Eventually(func(g Gomega) {
		cat := get(g, key).Status.Catalog
		g.Expect(cat.Request).To(Equal("req-2"))
		g.Expect(cat.Message).To(ContainSubstring(`bucket "backups" does not exist`))
		g.Expect(cat.Artifacts).To(BeEmpty())
	}).WithTimeout(30 * time.Second).Should(Succeed())
	g.Expect(strings.Contains(get(g, key).Status.Catalog.Message, "agent failed")).To(BeTrue())
}
