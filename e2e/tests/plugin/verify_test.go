package plugin_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	cairnv1 "cairn.dev/apis/meta/v1"
	migrationv1 "cairn.dev/apis/migration/v1"
	platformv1 "cairn.dev/apis/platform/v1"
	restorev1 "cairn.dev/apis/restore/v1"
	"cairn.dev/e2e/dbcheck"
)

func getPlan(g Gomega, ns, name string) *platformv1.ProtectionPlan {
	p := &platformv1.ProtectionPlan{}
	g.Expect(env.Client.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: name}, p)).To(Succeed())
	return p
}

// `verify --wait` restores the plan's newest backup into its scratch
// database and runs its checks now, although everyNBackups is far from
// due; each call is one more verification RestoreJob. `backup` on a plan's
// BackupJob runs it now; `status` shows the plan protected.
func TestVerifyPlanNow(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	ns := tenantNamespace(t)
	src, scratch := dbName(ns, "shop"), dbName(ns, "shop_verify")
	seed(t, src)
	plan := &platformv1.ProtectionPlan{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "shop"},
		Spec: platformv1.ProtectionPlanSpec{
			Database: postgresRef(src),
			Backup: platformv1.BackupTemplate{Schedule: "0 0 1 1 *", MaxRetries: ptr.To[int32](1),
				ActiveDeadlineSeconds: ptr.To[int64](600), Storage: s3Storage(ns)},
			Verification: platformv1.VerificationSpec{
				EveryNBackups: ptr.To[int32](100),
				RestoreInto: platformv1.ScratchDatabase{Host: "127.0.0.1", Port: int32(env.Servers.Postgres.Port), Database: scratch,
					CredentialsSecretRef: cairnv1.LocalObjectReference{Name: "db"}},
				Checks: []restorev1.Check{
					{Name: "has-orders", SQL: "select count(*) from orders", Equals: ptr.To(fmt.Sprint(orders))},
					{Name: "row-counts", RowCountsMatchBackup: true},
				},
				TimeoutSeconds: ptr.To[int64](600),
			},
			Objectives: platformv1.Objectives{RPO: metav1.Duration{Duration: 26 * time.Hour}},
		},
	}
	g.Expect(env.Client.Create(ctx, plan)).To(Succeed())
	g.Eventually(func() int { return cairn(t, "alice", ns, "backup", "shop", "--wait", "--timeout", "4m").code }).
		WithTimeout(5*time.Minute).WithPolling(2*time.Second).Should(Equal(0), "the plan's BackupJob exists, then backs up")
	// The first backup is verified at once; wait for it, then ask again.
	g.Eventually(func(g Gomega) platformv1.VerificationResult {
		lv := getPlan(g, ns, "shop").Status.LastVerification
		g.Expect(lv).NotTo(BeNil())
		return lv.Result
	}).WithTimeout(4 * time.Minute).WithPolling(time.Second).Should(Equal(platformv1.VerificationSucceeded))
	before := getPlan(g, ns, "shop").Status.Verifications

	out := ok(t, "alice", ns, "verify", "shop", "--wait", "--timeout", "4m")
	g.Expect(out).To(ContainSubstring("check has-orders: passed (" + fmt.Sprint(orders) + ")"))
	g.Expect(out).To(ContainSubstring("check row-counts: passed"))
	g.Expect(out).To(ContainSubstring("verification Succeeded"))
	cur := getPlan(g, ns, "shop")
	g.Expect(cur.Status.Verifications).To(Equal(before+1), "one call, one more verification")
	g.Expect(cur.Status.LastVerifyNowRequest).NotTo(BeEmpty(), "the verification answered the plugin's verify-now request")
	g.Expect(cur.Status.LastVerification.RestoreJob).To(Equal(fmt.Sprintf("shop-verify-%d", before+1)))
	exists, err := dbcheck.PostgresDatabaseExists(env.Servers.Postgres, scratch)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(exists).To(BeFalse(), "the scratch database the verification created is dropped")

	g.Expect(ok(t, "olga", ns, "status")).To(MatchRegexp(`ProtectionPlan\s+shop\s+Protected`))
	r := cairn(t, "olga", ns, "verify", "shop")
	g.Expect(r.stderr).To(ContainSubstring("forbidden"))
	g.Expect(getPlan(g, ns, "shop").Status.Verifications).To(Equal(before+1), "a refused call starts nothing")
}

// `approve --wait` moves a Manual MigrationJob waiting in ReadyForCutover on
// to Succeeded; `status` lists it as waiting for approval first.
func TestApproveMigrationCutover(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	ns := tenantNamespace(t)
	src, dst := dbName(ns, "orders"), dbName(ns, "orders_new")
	want := seed(t, src)
	mj := &migrationv1.MigrationJob{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "orders"},
		Spec: migrationv1.MigrationJobSpec{Source: postgresRef(src), Target: migrationv1.TargetDatabase{DatabaseRef: postgresRef(dst)},
			Cutover: migrationv1.CutoverSpec{Mode: migrationv1.CutoverManual, WritersStopped: true}},
	}
	g.Expect(env.Client.Create(ctx, mj)).To(Succeed())
	g.Eventually(func(g Gomega) migrationv1.Phase {
		cur := &migrationv1.MigrationJob{}
		g.Expect(env.Client.Get(ctx, client.ObjectKeyFromObject(mj), cur)).To(Succeed())
		g.Expect(cur.Status.Phase).NotTo(Equal(migrationv1.PhaseFailed), "%+v", cur.Status.Conditions)
		return cur.Status.Phase
	}).WithTimeout(5 * time.Minute).WithPolling(time.Second).Should(Equal(migrationv1.PhaseReadyForCutover))
	g.Expect(ok(t, "olga", ns, "status")).To(MatchRegexp(`MigrationJob\s+orders\s+ReadyForCutover.*ACTION: verified, waiting for approval`))

	out := ok(t, "alice", ns, "approve", "orders", "--wait", "--timeout", "4m")
	g.Expect(out).To(ContainSubstring("migrationjob/orders: cutover approved"))
	g.Expect(out).To(ContainSubstring("migrationjob/orders: Succeeded"))
	got, err := dbcheck.PostgresTables(env.Servers.Postgres, dst)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(got).To(Equal(want))
	r := cairn(t, "alice", ns, "approve", "orders")
	g.Expect(r.stderr).To(ContainSubstring("has finished (Succeeded): nothing to approve"))
}
