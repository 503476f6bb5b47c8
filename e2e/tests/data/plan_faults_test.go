package data_test

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/minio/minio-go/v7"
	. "github.com/onsi/gomega"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	backupv1 "cairn.dev/apis/backup/v1"
	cairnv1 "cairn.dev/apis/meta/v1"
	platformv1 "cairn.dev/apis/platform/v1"
	restorev1 "cairn.dev/apis/restore/v1"
	"cairn.dev/e2e/fixtures"
	"cairn.dev/e2e/install"
	"cairn.dev/libs/conditions"
)

// A backup whose stored artifact is corrupted after it succeeded fails its
// verification at the agent's artifact check, before the scratch database
// is even created: RecoverabilityVerified turns False with a Warning Event,
// and the series the CairnProtectionPlanVerificationFailing alert reads is 0
// on the orchestrator's /metrics. Deterministic: with everyNBackups 2 the
// second backup is not verified when it lands; the test corrupts it in the
// store, then lowers everyNBackups to 1, which makes the verification due at
// once, pinned to that (newest) artifact.
func TestProtectionPlanCorruptedArtifactFailsVerification(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	e := postgres()
	ns := namespace(t, e)
	src, scratch := dbName(ns, "shop"), dbName(ns, "shop_verify")
	g.Expect(e.seed(src, 300)).To(Succeed())
	want, err := e.tables(src)
	g.Expect(err).NotTo(HaveOccurred())

	plan := &platformv1.ProtectionPlan{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "shop"},
		Spec: platformv1.ProtectionPlanSpec{
			Database: cairnv1.DatabaseRef{Engine: e.name, Host: "127.0.0.1", Port: int32(e.port), Database: src,
				CredentialsSecretRef: cairnv1.LocalObjectReference{Name: "db"}},
			Backup: platformv1.BackupTemplate{Schedule: fixtures.Yearly, MaxRetries: ptr.To[int32](1),
				ActiveDeadlineSeconds: ptr.To[int64](600), Storage: s3Storage(ns)},
			Verification: platformv1.VerificationSpec{
				EveryNBackups: ptr.To[int32](2),
				RestoreInto: platformv1.ScratchDatabase{Host: "127.0.0.1", Port: int32(e.port), Database: scratch,
					CredentialsSecretRef: cairnv1.LocalObjectReference{Name: "db"}},
				Checks:         []restorev1.Check{{Name: "row-counts", RowCountsMatchBackup: true}},
				TimeoutSeconds: ptr.To[int64](600),
			},
			Objectives:     platformv1.Objectives{RPO: metav1.Duration{Duration: 26 * time.Hour}},
			DeletionPolicy: backupv1.DeletionPolicyDelete,
		},
	}
	g.Expect(env.Client.Create(ctx, plan)).To(Succeed())
	bj := &backupv1.BackupJob{}
	bj.Namespace, bj.Name = ns, plan.Name

	// The first backup is verified at once, and succeeds.
	created := time.Now()
	fixtures.SetRunNow(g, env.Client, bj, "first")
	st1 := waitSucceeded(t, bj, created, 3*time.Minute)
	cur := waitPlanCondition(t, plan, platformv1.RecoverabilityVerifiedCondition, 4*time.Minute)
	lv1 := cur.Status.LastVerification
	g.Expect(conditions.Get(cur, platformv1.RecoverabilityVerifiedCondition).Status).To(Equal(metav1.ConditionTrue),
		"the first verification: %+v", lv1)
	g.Expect(lv1.Artifact.Path).To(Equal(st1.LastArtifact.Path))
	g.Eventually(planMetric(plan, "cairn_protectionplan_verification_succeeded")).WithTimeout(time.Minute).Should(Equal(1.0))

	// The second backup lands; every 2nd backup is verified, so not yet.
	fixtures.SetRunNow(g, env.Client, bj, "second")
	st2 := waitSucceeded(t, bj, st1.LastSuccessfulTime.Time, 3*time.Minute)
	g.Expect(st2.LastArtifact.Path).NotTo(Equal(st1.LastArtifact.Path))
	g.Eventually(func(g Gomega) {
		p := getPlan(g, plan)
		g.Expect(p.Status.LastBackup.Artifact).NotTo(BeNil())
		g.Expect(p.Status.LastBackup.Artifact.Path).To(Equal(st2.LastArtifact.Path))
		g.Expect(p.Status.BackupsSinceVerification).To(Equal(int32(1)))
		g.Expect(p.Status.Verifications).To(Equal(int32(1)), "no verification of the second backup yet")
	}).WithTimeout(time.Minute).WithPolling(time.Second).Should(Succeed())

	// Flip one byte in the middle of the second backup's stored artifact.
	bj = fixtures.Get(g, env.Client, bj)
	b := stored(t, bj, st2.LastArtifact.Path)
	b[len(b)/2] ^= 0xff
	_, err = env.Servers.S3.Client().PutObject(ctx, bj.Spec.Storage.S3.Bucket, st2.LastArtifact.Path,
		bytes.NewReader(b), int64(len(b)), minio.PutObjectOptions{})
	g.Expect(err).NotTo(HaveOccurred())

	// everyNBackups 1: one backup since the last verification is enough.
	g.Eventually(func() error {
		p := &platformv1.ProtectionPlan{}
		if err := env.Client.Get(ctx, client.ObjectKeyFromObject(plan), p); err != nil {
			return err
		}
		p.Spec.Verification.EveryNBackups = ptr.To[int32](1)
		return env.Client.Update(ctx, p)
	}).WithTimeout(30 * time.Second).Should(Succeed())
	g.Eventually(func(g Gomega) platformv1.VerificationResult {
		p := getPlan(g, plan)
		g.Expect(p.Status.LastVerification).NotTo(BeNil())
		g.Expect(p.Status.LastVerification.RestoreJob).NotTo(Equal(lv1.RestoreJob))
		cur = p
		return p.Status.LastVerification.Result
	}).WithTimeout(4 * time.Minute).WithPolling(time.Second).Should(Equal(platformv1.VerificationFailed))
	lv2 := cur.Status.LastVerification
	t.Logf("verification of the corrupted artifact: %s", lv2.Message)
	g.Expect(lv2.Artifact.Path).To(Equal(st2.LastArtifact.Path), "pinned to the corrupted (newest) artifact")
	g.Expect(strings.ToLower(lv2.Message)).To(Or(ContainSubstring("corrupt"), ContainSubstring("checksum")),
		"the failure names the artifact check")
	rv := conditions.Get(cur, platformv1.RecoverabilityVerifiedCondition)
	g.Expect(rv.Status).To(Equal(metav1.ConditionFalse))
	g.Expect(rv.Reason).To(Equal(platformv1.VerificationFailedReason))
	g.Expect(rv.Message).To(ContainSubstring(st2.LastArtifact.Path))
	g.Expect(cur.Status.Phase).To(Equal(platformv1.PhaseAtRisk))
	g.Expect(cur.Status.RecoveryPoint.Time).To(BeTemporally("==", st1.LastSuccessfulTime.Time),
		"the recovery point stays the first (verified) backup's")
	g.Eventually(planEvents(plan)).WithTimeout(time.Minute).Should(ContainElement("Warning/VerificationFailed"))

	// The restore stopped at the artifact check: no scratch database was
	// created, no check ran, the protected database is as it was.
	rj := &restorev1.RestoreJob{}
	g.Expect(env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: lv2.RestoreJob}, rj)).To(Succeed())
	g.Expect(rj.Status.Phase).To(Equal(restorev1.PhaseFailed))
	g.Expect(rj.Spec.Source.BackupJob.Artifact).To(Equal(st2.LastArtifact.Path))
	g.Expect(rj.Status.TargetCreated).To(BeFalse())
	g.Expect(rj.Status.Checks).To(BeEmpty())
	exists, err := e.exists(scratch)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(exists).To(BeFalse(), "a restore that failed its artifact check created the scratch database")
	got, err := e.tables(src)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(got).To(Equal(want), "the protected database is untouched")

	// The alert's series: CairnProtectionPlanVerificationFailing fires on 0.
	expr := alertExpr(t, "CairnProtectionPlanVerificationFailing")
	g.Expect(expr).To(ContainSubstring("cairn_protectionplan_verification_succeeded"))
	g.Expect(expr).To(HaveSuffix("== 0"))
	g.Eventually(planMetric(plan, "cairn_protectionplan_verification_succeeded")).WithTimeout(time.Minute).Should(Equal(0.0))
	g.Expect(planMetric(plan, "cairn_protectionplan_verifications_total", "result", "Failed")(g)).To(Equal(1.0))
	g.Expect(planMetric(plan, "cairn_protectionplan_verifications_total", "result", "Succeeded")(g)).To(Equal(1.0))
}

// A plan whose BackupJob runs every minute meets an RPO of two minutes;
// spec.backup.suspend stops its backups, and once the newest backup is older
// than the RPO ObjectivesMet turns False by itself (the orchestrator's timed
// requeue, nothing else changes), with a Warning Event, and the series the
// CairnProtectionPlanRPOViolated alert compares say the same. Resuming
// meets the RPO again with the next scheduled backup.
func TestProtectionPlanObjectivesViolatedWhenBackupsSuspended(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	e := postgres()
	ns := namespace(t, e)
	src := dbName(ns, "shop")
	g.Expect(e.seed(src, 100)).To(Succeed())
	const rpo = 2 * time.Minute

	plan := &platformv1.ProtectionPlan{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "shop"},
		Spec: platformv1.ProtectionPlanSpec{
			Database: cairnv1.DatabaseRef{Engine: e.name, Host: "127.0.0.1", Port: int32(e.port), Database: src,
				CredentialsSecretRef: cairnv1.LocalObjectReference{Name: "db"}},
			Backup: platformv1.BackupTemplate{Schedule: "* * * * *", MaxRetries: ptr.To[int32](1),
				ActiveDeadlineSeconds: ptr.To[int64](600), Storage: s3Storage(ns)},
			Verification: platformv1.VerificationSpec{
				// Only the first backup is verified (always at once).
				EveryNBackups: ptr.To[int32](1000),
				RestoreInto: platformv1.ScratchDatabase{Host: "127.0.0.1", Port: int32(e.port), Database: dbName(ns, "shop_verify"),
					CredentialsSecretRef: cairnv1.LocalObjectReference{Name: "db"}},
				TimeoutSeconds: ptr.To[int64](600),
			},
			Objectives:     platformv1.Objectives{RPO: metav1.Duration{Duration: rpo}},
			DeletionPolicy: backupv1.DeletionPolicyDelete,
		},
	}
	g.Expect(env.Client.Create(ctx, plan)).To(Succeed())
	bj := &backupv1.BackupJob{}
	bj.Namespace, bj.Name = ns, plan.Name

	// Scheduled backups meet the RPO: ObjectivesMet turns True with the
	// first (Unknown before it; False if it took longer than the RPO since
	// the plan's creation), and stays True over the next scheduled backup.
	var cur *platformv1.ProtectionPlan
	g.Eventually(func(g Gomega) metav1.ConditionStatus {
		cur = getPlan(g, plan)
		c := conditions.Get(cur, platformv1.ObjectivesMetCondition)
		g.Expect(c).NotTo(BeNil())
		return c.Status
	}).WithTimeout(4 * time.Minute).WithPolling(time.Second).Should(Equal(metav1.ConditionTrue))
	first := cur.Status.LastBackup.SuccessfulTime.Time
	g.Eventually(func(g Gomega) {
		p := getPlan(g, plan)
		g.Expect(conditions.Get(p, platformv1.ObjectivesMetCondition).Status).To(Equal(metav1.ConditionTrue))
		g.Expect(p.Status.LastBackup.SuccessfulTime.Time).To(BeTemporally(">", first))
	}).WithTimeout(3 * time.Minute).WithPolling(time.Second).Should(Succeed())
	g.Expect(len(fixtures.Jobs(g, env.Client, bj, client.MatchingLabels{"backup.cairn.dev/run": "scheduled"}))).
		To(BeNumerically(">=", 2), "the backups are the CronJob's scheduled runs")

	// Suspend the plan's backups: the BackupJob follows.
	g.Eventually(func() error {
		p := &platformv1.ProtectionPlan{}
		if err := env.Client.Get(ctx, client.ObjectKeyFromObject(plan), p); err != nil {
			return err
		}
		p.Spec.Backup.Suspend = true
		return env.Client.Update(ctx, p)
	}).WithTimeout(30 * time.Second).Should(Succeed())
	suspended := time.Now()
	g.Eventually(func(g Gomega) bool { return fixtures.Get(g, env.Client, bj).Spec.Suspend }).
		WithTimeout(time.Minute).WithPolling(time.Second).Should(BeTrue())

	// Past the RPO: ObjectivesMet False, naming the rpo.
	g.Eventually(func(g Gomega) metav1.ConditionStatus {
		cur = getPlan(g, plan)
		return conditions.Get(cur, platformv1.ObjectivesMetCondition).Status
	}).WithTimeout(rpo + 2*time.Minute).WithPolling(time.Second).Should(Equal(metav1.ConditionFalse))
	om := conditions.Get(cur, platformv1.ObjectivesMetCondition)
	last := cur.Status.LastBackup.SuccessfulTime.Time
	t.Logf("ObjectivesMet=False %s: %s (newest backup %s, suspended at %s)", om.Reason, om.Message,
		last.UTC().Format(time.RFC3339), suspended.UTC().Format(time.RFC3339))
	g.Expect(om.Reason).To(Equal(platformv1.ObjectivesViolatedReason))
	g.Expect(om.Message).To(HavePrefix("rpo: the newest successful backup is "))
	g.Expect(om.Message).To(HaveSuffix("old, more than " + rpo.String()))
	g.Expect(time.Since(last)).To(BeNumerically(">", rpo))
	g.Expect(cur.Status.Phase).To(Equal(platformv1.PhaseAtRisk))
	g.Expect(conditions.Get(cur, cairnv1.ReadyCondition).Status).To(Equal(metav1.ConditionFalse))
	g.Eventually(planEvents(plan)).WithTimeout(time.Minute).Should(ContainElement("Warning/ObjectivesViolated"))

	// The alert's series: time() - last backup > rpo.
	expr := alertExpr(t, "CairnProtectionPlanRPOViolated")
	g.Expect(expr).To(ContainSubstring("time() - max by (namespace, name) (cairn_protectionplan_last_backup_timestamp_seconds)"))
	g.Expect(expr).To(ContainSubstring("> max by (namespace, name) (cairn_protectionplan_rpo_seconds)"))
	g.Expect(planMetric(plan, "cairn_protectionplan_rpo_seconds")(g)).To(Equal(rpo.Seconds()))
	ts := planMetric(plan, "cairn_protectionplan_last_backup_timestamp_seconds")(g)
	g.Expect(ts).To(Equal(float64(last.Unix())))
	g.Expect(float64(time.Now().Unix())-ts).To(BeNumerically(">", rpo.Seconds()), "the alert's expression holds")

	// Resumed: the next scheduled backup meets the RPO again.
	g.Eventually(func() error {
		p := &platformv1.ProtectionPlan{}
		if err := env.Client.Get(ctx, client.ObjectKeyFromObject(plan), p); err != nil {
			return err
		}
		p.Spec.Backup.Suspend = false
		return env.Client.Update(ctx, p)
	}).WithTimeout(30 * time.Second).Should(Succeed())
	g.Eventually(func(g Gomega) metav1.ConditionStatus {
		cur = getPlan(g, plan)
		return conditions.Get(cur, platformv1.ObjectivesMetCondition).Status
	}).WithTimeout(3 * time.Minute).WithPolling(time.Second).Should(Equal(metav1.ConditionTrue))
	g.Expect(cur.Status.LastBackup.SuccessfulTime.Time).To(BeTemporally(">", last))
	g.Eventually(planEvents(plan)).WithTimeout(time.Minute).Should(ContainElement("Normal/ObjectivesMet"))
}

func getPlan(g Gomega, plan *platformv1.ProtectionPlan) *platformv1.ProtectionPlan {
	p := &platformv1.ProtectionPlan{}
	g.Expect(env.Client.Get(context.Background(), client.ObjectKeyFromObject(plan), p)).To(Succeed())
	return p
}

// planMetric scrapes the orchestrator process's /metrics and returns the
// plan's series name (labels namespace and name, plus extra label pairs).
func planMetric(plan *platformv1.ProtectionPlan, name string, extra ...string) func(Gomega) float64 {
	return func(g Gomega) float64 {
		samples, err := env.Operators["orchestrator"].Metrics(context.Background())
		g.Expect(err).NotTo(HaveOccurred())
		labels := map[string]string{"namespace": plan.Namespace, "name": plan.Name}
		for i := 0; i+1 < len(extra); i += 2 {
			labels[extra[i]] = extra[i+1]
		}
		v, ok := install.Find(samples, name, labels)
		g.Expect(ok).To(BeTrue(), "no series %s%v on the orchestrator's /metrics", name, labels)
		return v
	}
}

// alertExpr returns the expression of alert name in the platform's
// PrometheusRule (platform/components/monitoring).
func alertExpr(t *testing.T, name string) string {
	t.Helper()
	path := filepath.Join(env.Opts.Root, "platform", "components", "monitoring", "prometheusrule.yaml")
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var rule struct {
		Spec struct {
			Groups []struct {
				Rules []struct {
					Alert string `json:"alert"`
					Expr  string `json:"expr"`
				} `json:"rules"`
			} `json:"groups"`
		} `json:"spec"`
	}
	if err := utilyaml.NewYAMLOrJSONDecoder(bytes.NewReader(b), 4096).Decode(&rule); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	for _, gr := range rule.Spec.Groups {
		for _, r := range gr.Rules {
			if r.Alert == name {
				return strings.Join(strings.Fields(r.Expr), " ")
			}
		}
	}
	t.Fatalf("%s has no alert %s", path, name)
	return ""
}
