package webhook

import (
	"fmt"
	"strings"
	"testing"
	"time"

	rbacv1 "k8s.io/api/rbac/v1"

	backupv1 "cairn.dev/apis/backup/v1"
	cairnv1 "cairn.dev/apis/meta/v1"
	"cairn.dev/libs/testing/testenv"
)

// TestHoldingASecretNeedsTheRightToUpdateIt (issue 47 item 11): the
// operator holds a Delete-policy BackupJob's S3 credentials or claim with a
// finalizer (and a point-in-time PostgreSQL BackupJob's database
// credentials); a user who may only get that Secret cannot make it do so —
// they could pin another team's Secret Terminating. With update on it,
// admitted; a Retain-policy BackupJob still needs only get; switching one
// to Delete is reviewed.
func TestHoldingASecretNeedsTheRightToUpdateIt(t *testing.T) {
	h := startWebhooks(t)
	ctx := t.Context()
	alice := tenant(t, h, "pg-backup", "s3-team")

	onS3 := func(name string, policy backupv1.DeletionPolicy) *backupv1.BackupJob {
		bj := h.postgres(name)
		bj.Spec.DeletionPolicy = policy
		bj.Spec.Storage = cairnv1.StorageSpec{S3: &cairnv1.S3Storage{Endpoint: "https://s3.shop.svc", Bucket: "backups",
			CredentialsSecretRef: cairnv1.LocalObjectReference{Name: "s3-team"}}}
		return bj
	}
	retain := onS3("retain", backupv1.DeletionPolicyRetain)
	testenv.Poll(t, 30*time.Second, "alice's Retain BackupJob on s3-team admitted", func() error { return alice.Create(ctx, retain) })

	want := fmt.Sprintf(`spec.storage.s3.credentialsSecretRef: user "alice" may not update secret "s3-team" in namespace %q`, h.ns)
	err := alice.Create(ctx, onS3("delete", backupv1.DeletionPolicyDelete))
	if err == nil || !strings.Contains(err.Error(), want) {
		t.Fatalf("alice's Delete BackupJob on s3-team: %v; want refused with %q", err, want)
	}
	err = patch(t, alice, retain, func(b *backupv1.BackupJob) { b.Spec.DeletionPolicy = backupv1.DeletionPolicyDelete })
	if err == nil || !strings.Contains(err.Error(), want) {
		t.Fatalf("alice switching to Delete: %v; want refused with %q", err, want)
	}
	pitr := onS3("pitr", backupv1.DeletionPolicyRetain)
	pitr.Spec.PointInTime = &backupv1.PointInTimeSpec{}
	wantDB := fmt.Sprintf(`spec.database.credentialsSecretRef: user "alice" may not update secret "pg-backup" in namespace %q`, h.ns)
	if err := alice.Create(ctx, pitr); err == nil || !strings.Contains(err.Error(), wantDB) {
		t.Fatalf("alice's point-in-time BackupJob: %v; want refused with %q", err, wantDB)
	}

	if _, err := h.env.Tenant(ctx, h.ns, "alice", rbacv1.PolicyRule{APIGroups: []string{""}, Resources: []string{"secrets"},
		ResourceNames: []string{"s3-team"}, Verbs: []string{"update"}}); err != nil {
		t.Fatal(err)
	}
	testenv.Poll(t, 30*time.Second, "alice's Delete BackupJob with update on s3-team admitted", func() error {
		return alice.Create(ctx, onS3("delete", backupv1.DeletionPolicyDelete))
	})

	// A PVC store's claim is held too (and its volume borrowed for the
	// delete): the same with update on the claim.
	onPVC := h.postgres("delete-pvc")
	onPVC.Spec.DeletionPolicy = backupv1.DeletionPolicyDelete
	wantPVC := fmt.Sprintf(`spec.storage.pvc.claimName: user "alice" may not update persistentvolumeclaim "backups" in namespace %q`, h.ns)
	if err := alice.Create(ctx, onPVC.DeepCopy()); err == nil || !strings.Contains(err.Error(), wantPVC) {
		t.Fatalf("alice's Delete BackupJob on claim backups: %v; want refused with %q", err, wantPVC)
	}
	if _, err := h.env.Tenant(ctx, h.ns, "alice", rbacv1.PolicyRule{APIGroups: []string{""}, Resources: []string{"persistentvolumeclaims"},
		ResourceNames: []string{"backups"}, Verbs: []string{"update"}}); err != nil {
		t.Fatal(err)
	}
	testenv.Poll(t, 30*time.Second, "alice's Delete BackupJob with update on the claim admitted", func() error {
		return alice.Create(ctx, onPVC.DeepCopy())
	})
}
