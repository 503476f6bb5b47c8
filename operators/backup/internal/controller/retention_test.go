package controller_test

import (
	"context"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"cairn.dev/agent/contract"
	backupv1 "cairn.dev/apis/backup/v1"
	cairnv1 "cairn.dev/apis/meta/v1"
)

// A BackupJob with calendar tiers runs the agent with the tiers (as JSON),
// its time zone and dry run instead of retention days, and records what the
// run's prune kept and why in status.retention; both forms at once, or
// tiers that keep nothing, are refused at admission.
func TestRetentionTiers(t *testing.T) {
	g := NewWithT(t)
	ns := newNamespace(t)
	b := backupJob(ns, "tiers")
	b.Spec.TimeZone = "Asia/Shanghai"
	b.Spec.Retention = &backupv1.RetentionPolicy{KeepDaily: 7, KeepMonthly: 12, MinVerified: 1, DryRun: true}
	bj := create(t, b)
	key := client.ObjectKeyFromObject(bj)
	converged(t, key, backupv1.PhaseScheduled)
	vars := map[string]string{}
	for _, e := range cronJob(g, key).Spec.JobTemplate.Spec.Template.Spec.Containers[0].Env {
		vars[e.Name] = e.Value
	}
	g.Expect(vars[contract.EnvRetention]).To(MatchJSON(`{"keepDaily":7,"keepMonthly":12,"minVerified":1}`))
	g.Expect(vars[contract.EnvTimeZone]).To(Equal("Asia/Shanghai"))
	g.Expect(vars[contract.EnvPruneDryRun]).To(Equal("true"))
	g.Expect(vars).NotTo(HaveKey(contract.EnvRetentionDays), "retentionDays (defaulted to 7) is not rendered beside tiers")

	res := strings.TrimSuffix(agentResult("cairn/"+ns+"/tiers/a2.pgdump.zst"), "}") +
		`,"retention":{"dryRun":true,"timeZone":"Asia/Shanghai","kept":[{"artifact":"a2.pgdump.zst","reasons":["newest","daily","monthly"],"lockedUntil":"2027-01-01T00:00:00Z"},{"artifact":"a0.pgdump.zst","reasons":["verified"]}],"pruned":["a1.pgdump.zst"]}}`
	finishRun(t, bj, "tiers-1", true, res)
	g.Eventually(func(g Gomega) *backupv1.RetentionStatus { return get(g, key).Status.Retention }).WithTimeout(30 * time.Second).
		Should(And(Not(BeNil()), HaveField("DryRun", true), HaveField("TimeZone", "Asia/Shanghai"), HaveField("Pruned", []string{"a1.pgdump.zst"}),
			HaveField("Kept", HaveLen(2))))
	kept := get(g, key).Status.Retention.Kept
	g.Expect(kept[0].LockedUntil).NotTo(BeNil(), "lockedUntil of a locked artifact")
	g.Expect(kept[0].LockedUntil.Time).To(BeTemporally("==", time.Date(2027, 1, 1, 0, 0, 0, 0, time.UTC)))
	kept[0].LockedUntil = nil
	g.Expect(kept).To(Equal([]backupv1.KeptArtifact{{Artifact: "a2.pgdump.zst", Reasons: []string{"newest", "daily", "monthly"}},
		{Artifact: "a0.pgdump.zst", Reasons: []string{"verified"}}}))

	for name, mutate := range map[string]func(*backupv1.BackupJob){
		"both forms":   func(b *backupv1.BackupJob) { b.Spec.RetentionDays = 14 },
		"keep nothing": func(b *backupv1.BackupJob) { b.Spec.Retention = &backupv1.RetentionPolicy{MinVerified: 2} },
	} {
		bad := backupJob(ns, "bad-"+strings.ReplaceAll(name, " ", "-"))
		bad.Spec.Retention = &backupv1.RetentionPolicy{KeepDaily: 7}
		mutate(bad)
		err := env.Client.Create(context.Background(), bad)
		g.Expect(err).To(HaveOccurred(), name)
		g.Expect(err.Error()).To(ContainSubstring("retention"), name)
	}
}

// objectLock renders the agent's S3 Object Lock variables (mode in S3's
// spelling, days when given); admission refuses it on a PVC store and
// without days beside calendar tiers.
func TestObjectLockRendering(t *testing.T) {
	g := NewWithT(t)
	ns := newNamespace(t)
	b := backupJob(ns, "locked")
	g.Expect(b.Spec.Storage.S3).NotTo(BeNil(), "the suite's BackupJob uses S3")
	b.Spec.ObjectLock = &backupv1.ObjectLockSpec{Mode: "Compliance"}
	bj := create(t, b)
	key := client.ObjectKeyFromObject(bj)
	converged(t, key, backupv1.PhaseScheduled)
	vars := map[string]string{}
	for _, e := range cronJob(g, key).Spec.JobTemplate.Spec.Template.Spec.Containers[0].Env {
		vars[e.Name] = e.Value
	}
	g.Expect(vars[contract.EnvS3ObjectLock]).To(Equal("COMPLIANCE"))
	g.Expect(vars).NotTo(HaveKey(contract.EnvS3ObjectLockDays), "days default to the retention days, in the agent")

	for name, mutate := range map[string]func(*backupv1.BackupJob){
		"pvc": func(b *backupv1.BackupJob) {
			b.Spec.Storage = cairnv1.StorageSpec{PVC: &cairnv1.PVCStorage{ClaimName: "backups"}}
		},
		"tiers without days": func(b *backupv1.BackupJob) { b.Spec.Retention = &backupv1.RetentionPolicy{KeepDaily: 7} },
	} {
		bad := backupJob(ns, "lock-"+strings.ReplaceAll(name, " ", "-"))
		bad.Spec.ObjectLock = &backupv1.ObjectLockSpec{Mode: "Governance"}
		mutate(bad)
		err := env.Client.Create(context.Background(), bad)
		g.Expect(err).To(HaveOccurred(), name)
		g.Expect(err.Error()).To(ContainSubstring("objectLock"), name)
	}
}
