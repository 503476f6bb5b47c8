package webhook

import (
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	backupv1 "cairn.dev/apis/backup/v1"
	cairnv1 "cairn.dev/apis/meta/v1"
	"cairn.dev/libs/access"
	"cairn.dev/libs/testing/testenv"
)

// editor is user name bound in h.ns to the platform's cairn-edit
// ClusterRole (platform/tenant_roles.yaml) and to nothing else: no Secret,
// no claim, no ConfigMap.
func editor(t *testing.T, h *harness, name string) client.Client {
	t.Helper()
	ctx := t.Context()
	root, err := testenv.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	role := &rbacv1.ClusterRole{}
	if err := h.env.Client.Get(ctx, client.ObjectKey{Name: "cairn-edit"}, role); err != nil {
		testenv.ApplyYAML(t, h.env.Client, filepath.Join(root, "platform", "tenant_roles.yaml"))
	}
	if err := h.env.Client.Create(ctx, &rbacv1.RoleBinding{
		ObjectMeta: metav1.ObjectMeta{Namespace: h.ns, Name: "cairn-edit-" + name},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "cairn-edit"},
		Subjects:   []rbacv1.Subject{{Kind: rbacv1.UserKind, APIGroup: rbacv1.GroupName, Name: name}},
	}); err != nil {
		t.Fatal(err)
	}
	cfg, err := h.env.AddUser(name)
	if err != nil {
		t.Fatal(err)
	}
	c, err := client.New(cfg, client.Options{Scheme: h.scheme})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// patch applies change to the current bj as c, a merge patch.
func patch(t *testing.T, c client.Client, bj *backupv1.BackupJob, change func(*backupv1.BackupJob)) error {
	t.Helper()
	cur := &backupv1.BackupJob{}
	if err := c.Get(t.Context(), client.ObjectKeyFromObject(bj), cur); err != nil {
		return err
	}
	base := cur.DeepCopy()
	change(cur)
	return c.Patch(t.Context(), cur, client.MergeFrom(base))
}

// TestAnUpdateThatRedirectsACredentialIsReviewedAgain: a user bound only
// to cairn-edit (no Secret, claim or ConfigMap) cannot move a BackupJob
// someone else made to another database host or S3 endpoint, bucket or
// prefix, or drop its encryption (issue 47 item 1): each is a new use of
// the credentials, refused with the field named. A user who may get the
// Secrets makes the same change and the approval is re-signed for it. A
// label-only or schedule-only update still asks nothing.
func TestAnUpdateThatRedirectsACredentialIsReviewedAgain(t *testing.T) {
	h := startWebhooks(t)
	ctx := t.Context()
	eve := editor(t, h, "eve")

	pg := h.postgres("redirect-pg")
	if err := h.c.Create(ctx, pg); err != nil {
		t.Fatal(err)
	}
	s3 := h.postgres("redirect-s3")
	s3.Spec.Storage = cairnv1.StorageSpec{S3: &cairnv1.S3Storage{Endpoint: "https://s3.shop.svc", Bucket: "backups", Prefix: "prod/",
		CredentialsSecretRef: cairnv1.LocalObjectReference{Name: "s3-backup"}}}
	s3.Spec.Encryption = &cairnv1.EncryptionSpec{Recipients: cairnv1.RecipientsSource{
		ConfigMapKeyRef: &cairnv1.KeySelector{Name: "recipients", Key: "age"}}}
	if err := h.c.Create(ctx, s3); err != nil {
		t.Fatal(err)
	}

	// Eve may update BackupJobs: a label and the schedule need no review.
	testenv.Poll(t, 30*time.Second, "eve's label-only update admitted", func() error {
		return patch(t, eve, pg, func(b *backupv1.BackupJob) { b.Labels = map[string]string{"team": "eve"} })
	})
	before := h.guard.Reviewer.Reviews()
	if err := patch(t, eve, pg, func(b *backupv1.BackupJob) { b.Labels["tier"] = "gold" }); err != nil {
		t.Fatalf("label-only update: %v", err)
	}
	if err := patch(t, eve, pg, func(b *backupv1.BackupJob) { b.Spec.Schedule = "0 4 * * *" }); err != nil {
		t.Fatalf("schedule-only update: %v", err)
	}
	if n := h.guard.Reviewer.Reviews() - before; n != 0 {
		t.Fatalf("a label-only and a schedule-only update sent %d SubjectAccessReviews, want 0", n)
	}

	pgSecret := fmt.Sprintf(`user "eve" may not get secret "pg-backup" in namespace %q`, h.ns)
	s3Secret := fmt.Sprintf(`user "eve" may not get secret "s3-backup" in namespace %q`, h.ns)
	for _, tc := range []struct {
		name, field, want string
		bj                *backupv1.BackupJob
		change            func(*backupv1.BackupJob)
	}{
		{"database.host", "spec.database.host", pgSecret, pg, func(b *backupv1.BackupJob) { b.Spec.Database.Host = "evil.example" }},
		{"database.port", "spec.database.port", pgSecret, pg, func(b *backupv1.BackupJob) { b.Spec.Database.Port = 6543 }},
		{"database.database", "spec.database.database", pgSecret, pg, func(b *backupv1.BackupJob) { b.Spec.Database.Database = "payroll" }},
		{"pvc.claimName", "spec.storage.pvc.claimName", pgSecret, pg, func(b *backupv1.BackupJob) { b.Spec.Storage.PVC.ClaimName = "eves-claim" }},
		{"s3.endpoint", "spec.storage.s3.endpoint", s3Secret, s3, func(b *backupv1.BackupJob) { b.Spec.Storage.S3.Endpoint = "https://evil.example" }},
		{"s3.bucket", "spec.storage.s3.bucket", s3Secret, s3, func(b *backupv1.BackupJob) { b.Spec.Storage.S3.Bucket = "eves-bucket" }},
		{"s3.prefix", "spec.storage.s3.prefix", s3Secret, s3, func(b *backupv1.BackupJob) { b.Spec.Storage.S3.Prefix = "public/" }},
		{"s3.insecure", "spec.storage.s3.insecure", s3Secret, s3, func(b *backupv1.BackupJob) { b.Spec.Storage.S3.Insecure = true }},
		{"encryption removed", "spec.encryption", s3Secret, s3, func(b *backupv1.BackupJob) { b.Spec.Encryption = nil }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := patch(t, eve, tc.bj, tc.change)
			if err == nil {
				t.Fatalf("eve's update of %s admitted; want refused", tc.field)
			}
			if !strings.Contains(err.Error(), tc.want) || !strings.Contains(err.Error(), "this update changes") ||
				!strings.Contains(err.Error(), tc.field) {
				t.Fatalf("refused with %v; want %q naming %s", err, tc.want, tc.field)
			}
		})
	}

	// Alice may get both Secrets and the claim: the same redirections are
	// admitted and approved for their new uses.
	alice := tenant(t, h, "pg-backup", "s3-backup")
	testenv.Poll(t, 30*time.Second, "alice's database.host update admitted", func() error {
		return patch(t, alice, pg, func(b *backupv1.BackupJob) { b.Spec.Database.Host = "pg2.shop.svc" })
	})
	// Removing the encryption also needs the recipients' ConfigMap.
	err := patch(t, alice, s3, func(b *backupv1.BackupJob) { b.Spec.Encryption = nil })
	if want := `spec.encryption.recipients.configMapKeyRef (this update removes spec.encryption): user "alice" may not get configmap "recipients"`; err == nil || !strings.Contains(err.Error(), want) {
		t.Fatalf("alice removing the encryption: %v; want refused with %q", err, want)
	}
	if _, err := h.env.Tenant(ctx, h.ns, "alice", rbacv1.PolicyRule{APIGroups: []string{""}, Resources: []string{"configmaps"},
		ResourceNames: []string{"recipients"}, Verbs: []string{"get"}}); err != nil {
		t.Fatal(err)
	}
	testenv.Poll(t, 30*time.Second, "alice's s3.endpoint update admitted", func() error {
		return patch(t, alice, s3, func(b *backupv1.BackupJob) { b.Spec.Storage.S3.Endpoint = "https://s3-2.shop.svc" })
	})
	for _, bj := range []*backupv1.BackupJob{pg, s3} {
		got := &backupv1.BackupJob{}
		if err := h.c.Get(ctx, client.ObjectKeyFromObject(bj), got); err != nil {
			t.Fatal(err)
		}
		if !h.guard.Approver.Approved(got, access.BackupJobKind, access.BackupJobChecks(got)) {
			t.Errorf("%s: not approved for its new uses: %v", got.Name, got.Annotations)
		}
	}

	// With it, the removal is admitted, with a warning.
	aliceW, warnings := h.env.WarningClient(t, aliceConfig(t, h))
	if err := patch(t, aliceW, s3, func(b *backupv1.BackupJob) { b.Spec.Encryption = nil }); err != nil {
		t.Fatalf("alice removing the encryption with the recipients' ConfigMap: %v", err)
	}
	if w := strings.Join(warnings.Take(), "\n"); !strings.Contains(w, "spec.encryption is removed: the next backups are stored unencrypted") {
		t.Errorf("warnings %q: want one about the removed encryption", w)
	}
}

// aliceConfig is alice's client configuration (tenant made her).
func aliceConfig(t *testing.T, h *harness) *rest.Config {
	t.Helper()
	cfg, err := h.env.AddUser("alice")
	if err != nil {
		t.Fatal(err)
	}
	return cfg
}
