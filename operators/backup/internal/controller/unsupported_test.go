package controller_test

import (
	"fmt"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	batchv1 "k8s.io/api/batch/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	backupv1 "cairn.dev/apis/backup/v1"
	cairnv1 "cairn.dev/apis/meta/v1"
	"cairn.dev/operators/backup/internal/controller"
)

// unsupportedFailure is the agent's termination message when its image has
// no tool that can serve the server (exit code 4).
const unsupportedFailure = `{"error":"backup failed: unsupported server version: PostgreSQL 18.6 cannot be served by this agent image's tools (it supports PostgreSQL 15 and older); use an agent image with PostgreSQL 18 (or newer) tools","code":"UnsupportedServerVersion","server":{"engine":"postgres","version":"18.6"}}`

func resultWithServer(artifact, engine, version string) string {
	return fmt.Sprintf(`{"artifact":%q,"size":2048,"checksum":"sha256:%064x","start":"2026-12-01T18:00:00Z","end":"2026-12-01T18:01:00Z","durationSeconds":60,"engine":"postgres","server":{"engine":%q,"version":%q}}`,
		artifact, 7, engine, version)
}

// A run whose agent reports the server's version unsupported by its image
// stalls the BackupJob (Stalled=True, Ready=False, reason
// UnsupportedServerVersion, the agent's message) and suspends its CronJob:
// no scheduled run retries it. A spec change runs again. The server a run
// reported (in its result, or in the refusal) is recorded in status.server.
func TestUnsupportedServerStallsUntilTheSpecChanges(t *testing.T) {
	g := NewWithT(t)
	ns := newNamespace(t)
	bj := create(t, backupJob(ns, "orders18"))
	key := client.ObjectKeyFromObject(bj)
	converged(t, key, backupv1.PhaseScheduled)

	finishRun(t, bj, "orders18-1001", true, resultWithServer("cairn/"+ns+"/orders18/a1.pgdump.zst", "postgres", "15.20"))
	got := converged(t, key, backupv1.PhaseSucceeded)
	g.Expect(got.Status.Server).To(Equal(&cairnv1.ServerInfo{Engine: "postgres", Version: "15.20"}))

	// The server was upgraded to 18; the image has 15's tools.
	finishRun(t, bj, "orders18-1002", false, unsupportedFailure)
	g.Eventually(func(g Gomega) {
		got = get(g, key)
		stalled := meta.FindStatusCondition(got.Status.Conditions, cairnv1.StalledCondition)
		g.Expect(stalled).NotTo(BeNil(), "status %+v", got.Status)
		g.Expect(stalled.Status).To(Equal(metav1.ConditionTrue))
		g.Expect(stalled.Reason).To(Equal(cairnv1.UnsupportedServerVersionReason))
		g.Expect(stalled.Message).To(And(ContainSubstring("PostgreSQL 18.6"), ContainSubstring("it supports PostgreSQL 15 and older"),
			ContainSubstring("orders18-1002")))
		ready := meta.FindStatusCondition(got.Status.Conditions, cairnv1.ReadyCondition)
		g.Expect(ready).NotTo(BeNil())
		g.Expect(ready.Status).To(Equal(metav1.ConditionFalse))
		g.Expect(ready.Reason).To(Equal(cairnv1.UnsupportedServerVersionReason))
		g.Expect(got.Status.Phase).To(Equal(backupv1.PhaseFailed))
		g.Expect(got.Status.UnsupportedServer).NotTo(BeNil())
		g.Expect(got.Status.UnsupportedServer.Image).To(Equal(agentImage))
		g.Expect(got.Status.UnsupportedServer.Generation).To(Equal(got.Generation))
		g.Expect(*cronJob(g, key).Spec.Suspend).To(BeTrue(), "the schedule starts no run that must fail the same way")
	}).WithTimeout(30 * time.Second).Should(Succeed())
	g.Expect(got.Status.Server).To(Equal(&cairnv1.ServerInfo{Engine: "postgres", Version: "18.6"}), "the refused run's server")

	// Another reconcile (an unrelated annotation) keeps it stalled.
	update(t, key, func(bj *backupv1.BackupJob) { bj.Annotations = map[string]string{"unrelated": "1"} })
	g.Consistently(func(g Gomega) {
		got := get(g, key)
		g.Expect(meta.IsStatusConditionTrue(got.Status.Conditions, cairnv1.StalledCondition)).To(BeTrue())
		g.Expect(*cronJob(g, key).Spec.Suspend).To(BeTrue())
	}).WithTimeout(2 * time.Second).Should(Succeed())

	// A spec change (here the schedule; in practice another database or
	// image) lets the schedule run again.
	update(t, key, func(bj *backupv1.BackupJob) { bj.Spec.Schedule = "0 3 * * *" })
	g.Eventually(func(g Gomega) {
		got := get(g, key)
		g.Expect(got.Status.ObservedGeneration).To(Equal(got.Generation))
		g.Expect(meta.IsStatusConditionTrue(got.Status.Conditions, cairnv1.StalledCondition)).To(BeFalse())
		g.Expect(got.Status.UnsupportedServer).To(BeNil())
		g.Expect(*cronJob(g, key).Spec.Suspend).To(BeFalse())
	}).WithTimeout(30 * time.Second).Should(Succeed())
}

// A run that failed for the same reason but on another agent image than
// the one the operator now chooses (it was since given a newer one) does
// not stall: it is rerun at once with the current image.
func TestUnsupportedServerOnAnOldImageDoesNotStall(t *testing.T) {
	g := NewWithT(t)
	ns := newNamespace(t)
	bj := create(t, backupJob(ns, "orders18b"))
	key := client.ObjectKeyFromObject(bj)
	converged(t, key, backupv1.PhaseScheduled)

	finishRunImage(t, bj, "orders18b-1001", "example.test/cairn/agent:old", unsupportedFailure)
	g.Eventually(func(g Gomega) {
		got := get(g, key)
		g.Expect(got.Status.LastRunName).To(Equal("orders18b-1001"))
		g.Expect(got.Status.Phase).To(Equal(backupv1.PhaseRunning))
		g.Expect(meta.IsStatusConditionTrue(got.Status.Conditions, cairnv1.StalledCondition)).To(BeFalse())
		g.Expect(got.Status.UnsupportedServer).To(BeNil())
		g.Expect(*cronJob(g, key).Spec.Suspend).To(BeFalse())
		jobs := runNowJobs(g, ns)
		g.Expect(jobs).To(HaveLen(1))
		g.Expect(jobs[0].Spec.Template.Spec.Containers[0].Image).To(Equal(agentImage))
	}).WithTimeout(30 * time.Second).Should(Succeed())
}

// finishRunImage is a failed run of the CronJob's whose agent ran image.
func finishRunImage(t *testing.T, bj *backupv1.BackupJob, name, image, msg string) {
	t.Helper()
	finishRunWith(t, bj, name, false, msg, metav1.Now(), func(j *batchv1.Job) {
		j.Spec.Template.Spec.Containers[0].Image = image
		j.Annotations = map[string]string{controller.AgentImageAnnotation: image}
	})
}

// With --agent-images mapping the refused server to another image, the
// refusal is not a stall: the run is rerun at once with that image (a Job
// named after the refused run) and the CronJob takes it. A refusal by the
// chosen image itself stalls.
func TestUnsupportedServerRerunsWithTheImageThatServesIt(t *testing.T) {
	g := NewWithT(t)
	ns := newNamespace(t)
	b := backupJob(ns, "shop97")
	b.Spec.Database.Engine = cairnv1.MySQLEngine
	bj := create(t, b)
	key := client.ObjectKeyFromObject(bj)
	converged(t, key, backupv1.PhaseScheduled)
	g.Expect(cronJob(g, key).Spec.JobTemplate.Spec.Template.Spec.Containers[0].Image).To(Equal(agentImage), "server unknown: --agent-image")

	refused := `{"error":"backup failed: unsupported server version: MySQL 9.7.4 cannot be served by this agent image's tools (it supports MariaDB servers only)","code":"UnsupportedServerVersion","server":{"engine":"mysql","version":"9.7.4"}}`
	finishRun(t, bj, "shop97-1001", false, refused)
	g.Eventually(func(g Gomega) {
		jobs := runNowJobs(g, ns)
		g.Expect(jobs).To(HaveLen(1))
		g.Expect(jobs[0].Spec.Template.Spec.Containers[0].Image).To(Equal(mysqlAgentImage))
		g.Expect(jobs[0].Annotations[controller.AgentImageAnnotation]).To(Equal(mysqlAgentImage))
		got := get(g, key)
		g.Expect(got.Status.Server).To(Equal(&cairnv1.ServerInfo{Engine: "mysql", Version: "9.7.4"}))
		g.Expect(got.Status.UnsupportedServer).To(BeNil())
		g.Expect(meta.IsStatusConditionTrue(got.Status.Conditions, cairnv1.StalledCondition)).To(BeFalse())
		cj := cronJob(g, key)
		g.Expect(cj.Spec.JobTemplate.Spec.Template.Spec.Containers[0].Image).To(Equal(mysqlAgentImage))
		g.Expect(cj.Spec.JobTemplate.Annotations[controller.AgentImageAnnotation]).To(Equal(mysqlAgentImage))
		g.Expect(*cj.Spec.Suspend).To(BeFalse())
	}).WithTimeout(30 * time.Second).Should(Succeed())

	// The mapped image refuses it too: nothing else serves it, it stalls.
	finishRun(t, bj, "shop97-1002", false, refused)
	g.Eventually(func(g Gomega) {
		got := get(g, key)
		stalled := meta.FindStatusCondition(got.Status.Conditions, cairnv1.StalledCondition)
		g.Expect(stalled).NotTo(BeNil())
		g.Expect(stalled.Reason).To(Equal(cairnv1.UnsupportedServerVersionReason))
		g.Expect(got.Status.UnsupportedServer).NotTo(BeNil())
		g.Expect(got.Status.UnsupportedServer.Image).To(Equal(mysqlAgentImage))
		g.Expect(*cronJob(g, key).Spec.Suspend).To(BeTrue())
	}).WithTimeout(30 * time.Second).Should(Succeed())
	g.Expect(runNowJobs(g, ns)).To(HaveLen(1), "one rerun only")
}
