package migration_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	batchv1 "k8s.io/api/batch/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	cairnv1 "cairn.dev/apis/meta/v1"
	migrationv1 "cairn.dev/apis/migration/v1"
)

// The migration operator is SIGKILLed while the copy Job runs; a new process
// resumes: every step ran in exactly one Job (the Jobs present at the kill
// are the same objects at the end), the migration succeeds and the target
// equals the source.
func TestOperatorKilledDuringCopying(t *testing.T) { killDuring(t, migrationv1.PhaseCopying) }

// The same with the kill while the verify Job runs.
func TestOperatorKilledDuringVerifying(t *testing.T) { killDuring(t, migrationv1.PhaseVerifying) }

func killDuring(t *testing.T, phase migrationv1.Phase) {
	g := NewWithT(t)
	ctx := context.Background()
	d := engine(cairnv1.PostgresEngine)
	mj, want, dst := setup(t, g, d, 20000, migrationv1.TransferSpec{},
		migrationv1.CutoverSpec{Mode: migrationv1.CutoverAuto, WritersStopped: true, SwitchSecret: &cairnv1.LocalObjectReference{Name: "app-db"}})
	g.Expect(env.Client.Create(ctx, mj)).To(Succeed())
	waitPhase(g, mj, phase)
	restart := killOperator(t, g)
	atKill := get(g, mj)
	before := map[string]types.UID{}
	for step, j := range stepJobs(g, mj) {
		before[step] = j.UID
	}
	t.Logf("SIGKILL in phase %s (status: %s) with step Jobs %v", phase, atKill.Status.Phase, keys(before))
	g.Expect(atKill.Status.Phase).To(Equal(phase), "the kill landed in the wanted phase")

	restart()
	cur := waitDone(g, mj)
	g.Expect(cur.Status.Phase).To(Equal(migrationv1.PhaseSucceeded), "conditions: %+v", cur.Status.Conditions)
	g.Expect(cur.Status.Verification).NotTo(BeNil())
	g.Expect(cur.Status.Verification.Mismatched).To(BeZero())
	g.Expect(cur.Status.Verification.Tables).To(Equal(int32(len(want))))
	got, err := d.tables(d.server, dst)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(got).To(Equal(want))

	// One Job per step, the Jobs of the kill unchanged, one status entry
	// per Job.
	all := &batchv1.JobList{}
	g.Expect(env.Client.List(ctx, all, client.InNamespace(mj.Namespace), client.MatchingLabels{migrationv1.MigrationJobLabel: mj.Name})).To(Succeed())
	perStep := map[string]int{}
	for _, j := range all.Items {
		perStep[j.Labels[migrationv1.StepLabel]]++
	}
	for step, n := range perStep {
		g.Expect(n).To(Equal(1), "Jobs of step %s", step)
	}
	after := stepJobs(g, mj)
	for step, uid := range before {
		g.Expect(after).To(HaveKey(step))
		g.Expect(after[step].UID).To(Equal(uid), "the Job of step %s was recreated", step)
	}
	g.Expect(cur.Status.Steps).To(HaveLen(len(after)))
	for _, s := range cur.Status.Steps {
		g.Expect(after).To(HaveKey(s.Step))
		g.Expect(after[s.Step].Name).To(Equal(s.JobName))
		g.Expect(s.Phase).To(Equal(migrationv1.StepSucceeded))
	}
	g.Expect(after).To(HaveKey("copy"))
	g.Expect(after).To(HaveKey("verify"))
	t.Logf("resumed after SIGKILL in %s: steps %v, %s", phase, keys(after), cur.Status.Verification.Summary)
	cleanup(g, mj)
}

// killOperator SIGKILLs the package's migration operator and returns a func
// that starts a new process (which must wait for the dead one's lease). A
// failed test still gets a new process, so that the next tests have one.
func killOperator(t *testing.T, g Gomega) func() {
	old := env.Operators["migration"]
	g.Expect(old.Kill()).To(Succeed())
	started := false
	start := func() {
		started = true
		op, err := env.StartOperator(context.Background(), "migration", fmt.Sprintf("-%d", time.Now().UnixNano()), nil)
		if err != nil {
			t.Fatalf("starting a new migration operator: %v", err)
		}
		env.Operators["migration"] = op
		t.Cleanup(func() {
			if t.Failed() {
				t.Logf("--- %s log (last 60 lines)\n%s", op.Name, op.Tail(60))
			}
		})
	}
	t.Cleanup(func() {
		if !started {
			start()
		}
	})
	return start
}

func get(g Gomega, mj *migrationv1.MigrationJob) *migrationv1.MigrationJob {
	cur := &migrationv1.MigrationJob{}
	g.Expect(env.Client.Get(context.Background(), client.ObjectKeyFromObject(mj), cur)).To(Succeed())
	return cur
}

// waitPhase polls (fast: the kill must land inside the phase) until mj is in
// phase; reaching an end phase first fails.
func waitPhase(g Gomega, mj *migrationv1.MigrationJob, phase migrationv1.Phase) {
	g.Eventually(func(g Gomega) migrationv1.Phase {
		p := get(g, mj).Status.Phase
		if p == migrationv1.PhaseSucceeded || p == migrationv1.PhaseFailed {
			StopTrying(fmt.Sprintf("the migration ended (%s) before phase %s", p, phase)).Now()
		}
		return p
	}).WithTimeout(5 * time.Minute).WithPolling(20 * time.Millisecond).Should(Equal(phase))
}

func waitDone(g Gomega, mj *migrationv1.MigrationJob) *migrationv1.MigrationJob {
	var cur *migrationv1.MigrationJob
	g.Eventually(func(g Gomega) migrationv1.Phase {
		cur = get(g, mj)
		return cur.Status.Phase
	}).WithTimeout(5 * time.Minute).WithPolling(time.Second).Should(BeElementOf(migrationv1.PhaseSucceeded, migrationv1.PhaseFailed))
	return cur
}

// stepJobs returns mj's Jobs by step; two Jobs of one step fail.
func stepJobs(g Gomega, mj *migrationv1.MigrationJob) map[string]batchv1.Job {
	l := &batchv1.JobList{}
	g.Expect(env.Client.List(context.Background(), l, client.InNamespace(mj.Namespace),
		client.MatchingLabels{migrationv1.MigrationJobLabel: mj.Name})).To(Succeed())
	out := map[string]batchv1.Job{}
	for _, j := range l.Items {
		step := j.Labels[migrationv1.StepLabel]
		g.Expect(out).NotTo(HaveKey(step), "two Jobs of step %s", step)
		out[step] = j
	}
	return out
}

func cleanup(g Gomega, mj *migrationv1.MigrationJob) {
	ctx := context.Background()
	g.Expect(env.Client.Delete(ctx, mj)).To(Succeed())
	g.Eventually(func() bool {
		return apierrors.IsNotFound(env.Client.Get(ctx, client.ObjectKeyFromObject(mj), &migrationv1.MigrationJob{}))
	}).WithTimeout(time.Minute).Should(BeTrue())
	g.Eventually(func(g Gomega) []batchv1.Job {
		l := &batchv1.JobList{}
		g.Expect(env.Client.List(ctx, l, client.InNamespace(mj.Namespace), client.MatchingLabels{migrationv1.MigrationJobLabel: mj.Name})).To(Succeed())
		return l.Items
	}).WithTimeout(time.Minute).Should(BeEmpty())
}

func keys[V any](m map[string]V) string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	return strings.Join(out, ",")
}
