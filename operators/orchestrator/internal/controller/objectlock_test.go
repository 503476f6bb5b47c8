package controller_test

import (
	"context"
	"testing"
	"time"

	. "github.com/onsi/gomega"

	backupv1 "cairn.dev/apis/backup/v1"
	cairnv1 "cairn.dev/apis/meta/v1"
	platformv1 "cairn.dev/apis/platform/v1"
)

func s3Storage() cairnv1.StorageSpec {
	return cairnv1.StorageSpec{S3: &cairnv1.S3Storage{Endpoint: "s3.storage.svc:9000", Bucket: "locked-backups",
		CredentialsSecretRef: cairnv1.LocalObjectReference{Name: "s3-credentials"}}}
}

// A plan's spec.backup.objectLock becomes its BackupJob's spec.objectLock
// (and follows an edit of the plan); admission refuses it on a PVC store,
// without days beside calendar tiers, and with an unknown mode, naming
// the field.
func TestPlanObjectLock(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	startOperator(t, time.Now())
	ns := namespace(t)
	p := plan(ns, "locked")
	p.Spec.Backup.Storage = s3Storage()
	p.Spec.Backup.Retention = &backupv1.RetentionPolicy{KeepDaily: 7, KeepMonthly: 12}
	p.Spec.Backup.ObjectLock = &backupv1.ObjectLockSpec{Mode: "Governance", Days: 8}
	g.Expect(env.Client.Create(ctx, p)).To(Succeed())
	bj := backupJobOf(t, p)
	g.Expect(bj.Spec.ObjectLock).To(Equal(p.Spec.Backup.ObjectLock))

	updatePlan(g, p, func(p *platformv1.ProtectionPlan) {
		p.Spec.Backup.ObjectLock = &backupv1.ObjectLockSpec{Mode: "Compliance", Days: 10}
	})
	g.Eventually(func(g Gomega) *backupv1.ObjectLockSpec { return get(g, bj).Spec.ObjectLock }).WithTimeout(timeout).
		Should(Equal(&backupv1.ObjectLockSpec{Mode: "Compliance", Days: 10}))

	for _, tc := range []struct {
		name   string
		mutate func(*platformv1.ProtectionPlan)
		want   string
	}{
		{"a PVC store", func(p *platformv1.ProtectionPlan) {
			p.Spec.Backup.Storage = cairnv1.StorageSpec{PVC: &cairnv1.PVCStorage{ClaimName: "backups"}}
		}, "objectLock: S3 Object Lock needs an S3 store"},
		{"tiers without days", func(p *platformv1.ProtectionPlan) {
			p.Spec.Backup.ObjectLock.Days = 0
		}, "objectLock.days: required with retention"},
		{"an unknown mode", func(p *platformv1.ProtectionPlan) {
			p.Spec.Backup.ObjectLock.Mode = "LegalHold"
		}, "spec.backup.objectLock.mode"},
		{"days beyond 100 years", func(p *platformv1.ProtectionPlan) {
			p.Spec.Backup.ObjectLock.Days = 36501
		}, "spec.backup.objectLock.days"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			bad := plan(ns, "badlock")
			bad.Spec.Backup.Storage = s3Storage()
			bad.Spec.Backup.Retention = &backupv1.RetentionPolicy{KeepDaily: 7}
			bad.Spec.Backup.ObjectLock = &backupv1.ObjectLockSpec{Mode: "Governance", Days: 7}
			tc.mutate(bad)
			err := env.Client.Create(ctx, bad)
			g.Expect(err).To(HaveOccurred())
			g.Expect(err.Error()).To(ContainSubstring(tc.want))
		})
	}
	// Without tiers, days default to retentionDays (in the agent): accepted.
	ok := plan(ns, "locked-days")
	ok.Spec.Backup.Storage = s3Storage()
	ok.Spec.Backup.ObjectLock = &backupv1.ObjectLockSpec{Mode: "Compliance"}
	g.Expect(env.Client.Create(ctx, ok)).To(Succeed())
	g.Expect(backupJobOf(t, ok).Spec.ObjectLock).To(Equal(ok.Spec.Backup.ObjectLock))
}
