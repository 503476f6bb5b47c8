package webhook

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"

	backupv1 "cairn.dev/apis/backup/v1"
	cairnv1 "cairn.dev/apis/meta/v1"
	"cairn.dev/libs/access"
	"cairn.dev/libs/testing/testenv"
)

// tenant is user alice in h.ns: she may create, update and get BackupJobs,
// get the PersistentVolumeClaim "backups" (h.postgres's store) and get only
// the Secrets named in secrets.
func tenant(t *testing.T, h *harness, secrets ...string) client.Client {
	t.Helper()
	rules := []rbacv1.PolicyRule{{APIGroups: []string{backupv1.GroupVersion.Group}, Resources: []string{"backupjobs"},
		Verbs: []string{"get", "create", "update", "patch"}},
		{APIGroups: []string{""}, Resources: []string{"persistentvolumeclaims"}, ResourceNames: []string{"backups"}, Verbs: []string{"get"}}}
	if len(secrets) > 0 {
		rules = append(rules, rbacv1.PolicyRule{APIGroups: []string{""}, Resources: []string{"secrets"}, ResourceNames: secrets, Verbs: []string{"get"}})
	}
	cfg, err := h.env.Tenant(t.Context(), h.ns, "alice", rules...)
	if err != nil {
		t.Fatal(err)
	}
	c, err := client.New(cfg, client.Options{Scheme: h.scheme})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// refusedWith polls f (RBAC takes a moment to apply) until it fails with an
// error containing want.
func refusedWith(t *testing.T, what, want string, f func() error) {
	t.Helper()
	testenv.Poll(t, 30*time.Second, what, func() error {
		err := f()
		if err == nil {
			return fmt.Errorf("admitted; want refused with %q", want)
		}
		if !strings.Contains(err.Error(), want) {
			return fmt.Errorf("refused with %v; want %q", err, want)
		}
		return nil
	})
}

// TestATenantCannotMakeABackupJobUseASecretTheyCannotRead: a user who may
// create BackupJobs but not read Secret db-admin cannot create or update a
// BackupJob naming it (as database or S3 credentials), nor one storing on
// a PersistentVolumeClaim they may not get; naming a Secret they may read works, and the admitted BackupJob carries the approval.
func TestATenantCannotMakeABackupJobUseASecretTheyCannotRead(t *testing.T) {
	h := startWebhooks(t)
	ctx := t.Context()
	alice := tenant(t, h, "pg-backup")

	steal := h.postgres("steal")
	steal.Spec.Database.CredentialsSecretRef.Name = "db-admin"
	want := fmt.Sprintf(`spec.database.credentialsSecretRef: user "alice" may not get secret "db-admin" in namespace %q`, h.ns)
	refusedWith(t, "alice's BackupJob naming db-admin refused", want, func() error { return alice.Create(ctx, steal.DeepCopy()) })

	s3 := h.postgres("steal-s3")
	s3.Spec.Storage = cairnv1.StorageSpec{S3: &cairnv1.S3Storage{Endpoint: "https://s3.example", Bucket: "backups",
		CredentialsSecretRef: cairnv1.LocalObjectReference{Name: "s3-admin"}}}
	refusedWith(t, "alice's BackupJob naming s3-admin refused",
		fmt.Sprintf(`spec.storage.s3.credentialsSecretRef: user "alice" may not get secret "s3-admin" in namespace %q`, h.ns),
		func() error { return alice.Create(ctx, s3.DeepCopy()) })

	// A claim she cannot see: its files are not hers to read or overwrite.
	pvc := h.postgres("steal-pvc")
	pvc.Spec.Storage = cairnv1.StorageSpec{PVC: &cairnv1.PVCStorage{ClaimName: "finance-archive"}}
	refusedWith(t, "alice's BackupJob naming claim finance-archive refused",
		fmt.Sprintf(`spec.storage.pvc.claimName: user "alice" may not get persistentvolumeclaim "finance-archive" in namespace %q`, h.ns),
		func() error { return alice.Create(ctx, pvc.DeepCopy()) })

	// Her own Secret: admitted, approved.
	own := h.postgres("own")
	testenv.Poll(t, 30*time.Second, "alice's BackupJob naming pg-backup admitted", func() error { return alice.Create(ctx, own) })
	if !h.guard.Approver.Approved(own, access.BackupJobKind, access.BackupJobChecks(own)) {
		t.Fatalf("admitted BackupJob not approved: annotations %v", own.Annotations)
	}

	// An update that adds db-admin is refused; one that keeps pg-backup
	// and where it is used (a schedule) is admitted without a review.
	upd := own.DeepCopy()
	upd.Spec.Database.CredentialsSecretRef.Name = "db-admin"
	err := alice.Update(ctx, upd)
	if err == nil || !strings.Contains(err.Error(), want) || !apierrors.IsForbidden(err) {
		t.Fatalf("update to db-admin: got %v, want Forbidden with %q", err, want)
	}
	before := h.guard.Reviewer.Reviews()
	keep := own.DeepCopy()
	keep.Spec.Schedule = "0 3 * * *"
	if err := alice.Update(ctx, keep); err != nil {
		t.Fatalf("update keeping the references: %v", err)
	}
	if n := h.guard.Reviewer.Reviews() - before; n != 0 {
		t.Fatalf("an update that adds no reference and sends nothing elsewhere sent %d SubjectAccessReviews, want 0", n)
	}
	// One that keeps pg-backup but sends it to another host is a new use
	// of it: reviewed again (issue 47), admitted for alice, who may get it.
	before = h.guard.Reviewer.Reviews()
	moved := keep.DeepCopy()
	moved.Spec.Database.Host = "pg2.shop.svc"
	if err := alice.Update(ctx, moved); err != nil {
		t.Fatalf("update moving the database: %v", err)
	}
	if n := h.guard.Reviewer.Reviews() - before; n == 0 {
		t.Fatal("an update moving spec.database.host sent no SubjectAccessReview")
	}

	// A forged approval is overwritten by the defaulting webhook: the
	// cluster admin's BackupJob naming db-admin is admitted and approved.
	admin := h.postgres("admin")
	admin.Spec.Database.CredentialsSecretRef.Name = "db-admin"
	admin.Annotations = map[string]string{access.Annotation: "v1.forged"}
	if err := h.c.Create(context.Background(), admin); err != nil {
		t.Fatalf("the cluster admin's BackupJob naming db-admin: %v", err)
	}
	if !h.guard.Approver.Approved(admin, access.BackupJobKind, access.BackupJobChecks(admin)) {
		t.Fatalf("admin's BackupJob not approved: annotations %v", admin.Annotations)
	}
}
