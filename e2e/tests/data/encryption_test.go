package data_test

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"strings"
	"testing"
	"time"

	"os"
	"path/filepath"

	"filippo.io/age"
	"github.com/klauspost/compress/zstd"
	"github.com/minio/minio-go/v7"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	backupv1 "cairn.dev/apis/backup/v1"
	cairnv1 "cairn.dev/apis/meta/v1"
	platformv1 "cairn.dev/apis/platform/v1"
	restorev1 "cairn.dev/apis/restore/v1"
	"cairn.dev/e2e/fixtures"
	"cairn.dev/libs/conditions"
)

// key is an age identity: its public key, private key and fingerprint.
type key struct{ pub, priv, fp string }

func newKey(t *testing.T) key {
	t.Helper()
	id, err := age.GenerateX25519Identity()
	if err != nil {
		t.Fatal(err)
	}
	pub := id.Recipient().String()
	sum := sha256.Sum256([]byte(pub))
	return key{pub: pub, priv: id.String(), fp: "age-fp:" + hex.EncodeToString(sum[:])[:16]}
}

func configMap(t *testing.T, ns, name string, data map[string]string) {
	t.Helper()
	NewWithT(t).Expect(env.Client.Create(context.Background(), &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}, Data: data})).To(Succeed())
}

func secret(t *testing.T, ns, name string, data map[string]string) {
	t.Helper()
	NewWithT(t).Expect(env.Client.Create(context.Background(), &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}, StringData: data})).To(Succeed())
}

// An encrypted backup (age, to a team key and an escrow key from a
// ConfigMap) of the real database: the stored bytes are not zstd and
// contain none of the tables' data; status names both recipients; a
// restore with the team identity gives equal tables; with another identity,
// or none, the restore fails before the target exists, with the failure's
// reason and the recipients named. PostgreSQL to S3, MariaDB to a PVC.
func TestEncryptedBackupAndRestore(t *testing.T) {
	for _, tc := range []struct {
		name    string
		engine  func() engine
		storage string
	}{
		{"postgres-s3", postgres, "s3"},
		{"mariadb-pvc", mariadb, "pvc"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			g := NewWithT(t)
			ctx := context.Background()
			e := tc.engine()
			ns := namespace(t, e)
			src := dbName(ns, "shop")
			g.Expect(e.seed(src, orders)).To(Succeed())
			want, err := e.tables(src)
			g.Expect(err).NotTo(HaveOccurred())
			team, escrow, other := newKey(t), newKey(t), newKey(t)
			configMap(t, ns, "backup-keys", map[string]string{"recipients": "# team\n" + team.pub + "\n# escrow\n" + escrow.pub + "\n"})
			secret(t, ns, "team-key", map[string]string{"identity": team.priv + "\n"})
			secret(t, ns, "other-key", map[string]string{"identity": other.priv + "\n"})

			storage := s3Storage(ns)
			if tc.storage == "pvc" {
				storage = pvcStorage(t, ns, "backups")
			}
			bj := backupJob(ns, "shop", e, src, fixtures.Yearly, storage)
			bj.Spec.Encryption = &cairnv1.EncryptionSpec{Recipients: cairnv1.RecipientsSource{
				ConfigMapKeyRef: &cairnv1.KeySelector{Name: "backup-keys", Key: "recipients"}}}
			g.Expect(env.Client.Create(ctx, bj)).To(Succeed())
			created := time.Now()
			fixtures.SetRunNow(g, env.Client, bj, "first")
			st := waitSucceeded(t, bj, created, 3*time.Minute)
			g.Expect(st.LastArtifact.EncryptedTo).To(Equal([]string{team.fp, escrow.fp}), "status names the recipients")
			g.Expect(st.LastArtifact.Path).To(HaveSuffix(".zst.age"))

			b := stored(t, bj, st.LastArtifact.Path)
			g.Expect(int64(len(b))).To(Equal(st.LastArtifact.Size))
			g.Expect(sha256sum(b)).To(Equal(st.LastArtifact.Checksum), "the checksum is of the stored (encrypted) bytes")
			g.Expect(bytes.HasPrefix(b, []byte("age-encryption.org/v1\n"))).To(BeTrue(), "an age file")
			dec, err := zstd.NewReader(nil)
			g.Expect(err).NotTo(HaveOccurred())
			_, derr := dec.DecodeAll(b, nil)
			dec.Close()
			g.Expect(derr).To(HaveOccurred(), "the stored bytes are not zstd-decodable")
			for _, clear := range []string{"@example.com", "customer ", "SKU-", "orders", "order_items"} {
				g.Expect(bytes.Contains(b, []byte(clear))).To(BeFalse(), "the stored bytes contain %q", clear)
			}
			for _, priv := range []string{team.priv, escrow.priv, "AGE-SECRET-KEY"} {
				g.Expect(storeHolds(t, bj, priv)).To(BeFalse(), "a private key is in the store")
			}

			// The right identity: equal tables.
			good := restoreJob(bj, "restore-team", e, dbName(ns, "shop_team"), "")
			good.Spec.Encryption = &cairnv1.DecryptionSpec{IdentitySecretRef: cairnv1.KeySelector{Name: "team-key", Key: "identity"}}
			g.Expect(env.Client.Create(ctx, good)).To(Succeed())
			good = waitRestore(t, good, 3*time.Minute)
			g.Expect(good.Status.Phase).To(Equal(restorev1.PhaseSucceeded), "restore: %s", lastMessage(good.Status.Conditions))
			got, err := e.tables(dbName(ns, "shop_team"))
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(got).To(Equal(want), "restored tables equal the source (rows and content checksum)")

			// Another identity, or none: refused before the target exists.
			for _, c := range []struct {
				name, reason string
				enc          *cairnv1.DecryptionSpec
			}{
				{"restore-other", restorev1.RestoreJobEncryptionIdentityMismatchReason,
					&cairnv1.DecryptionSpec{IdentitySecretRef: cairnv1.KeySelector{Name: "other-key", Key: "identity"}}},
				{"restore-none", restorev1.RestoreJobEncryptionIdentityMissingReason, nil},
			} {
				dst := dbName(ns, strings.ReplaceAll(c.name, "-", "_"))
				rj := restoreJob(bj, c.name, e, dst, "")
				rj.Spec.Encryption = c.enc
				g.Expect(env.Client.Create(ctx, rj)).To(Succeed())
				rj = waitRestore(t, rj, 3*time.Minute)
				g.Expect(rj.Status.Phase).To(Equal(restorev1.PhaseFailed))
				stalled := conditions.Get(rj, cairnv1.StalledCondition)
				g.Expect(stalled.Reason).To(Equal(c.reason), "%s: %s", c.name, stalled.Message)
				g.Expect(stalled.Message).To(And(ContainSubstring(team.fp), ContainSubstring(escrow.fp)), "the recipients it needs are named")
				g.Expect(stalled.Message).NotTo(ContainSubstring("AGE-SECRET-KEY"))
				exists, err := e.exists(dst)
				g.Expect(err).NotTo(HaveOccurred())
				g.Expect(exists).To(BeFalse(), "%s: the target database was created", c.name)
				t.Logf("%s refused: %s", c.name, stalled.Message)
			}
		})
	}
}

// storeHolds reports whether any object of bj's store holds s.
func storeHolds(t *testing.T, bj *backupv1.BackupJob, s string) bool {
	t.Helper()
	for _, p := range allObjects(t, bj) {
		if bytes.Contains(stored(t, bj, p), []byte(s)) {
			return true
		}
	}
	return false
}

// A ProtectionPlan with encrypted backups proves at each verification that
// its identity still decrypts the newest backup (DecryptionVerified True);
// when the backups' recipients are rotated to a new key and the plan's
// identity is not, the next verification reports it (False,
// IdentityCannotDecrypt, the new recipient named), before the scratch
// database is created.
func TestPlanReportsRotatedAwayIdentity(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	e := postgres()
	ns := namespace(t, e)
	src, scratch := dbName(ns, "vault"), dbName(ns, "vault_verify")
	g.Expect(e.seed(src, 500)).To(Succeed())
	old, rotated := newKey(t), newKey(t)
	configMap(t, ns, "backup-keys", map[string]string{"recipients": old.pub})
	secret(t, ns, "dr-key", map[string]string{"identity": old.priv})
	db := cairnv1.DatabaseRef{Engine: e.name, Host: "127.0.0.1", Port: int32(e.port), Database: src,
		CredentialsSecretRef: cairnv1.LocalObjectReference{Name: "db"}}
	plan := &platformv1.ProtectionPlan{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "vault"},
		Spec: platformv1.ProtectionPlanSpec{
			Database: db,
			Backup: platformv1.BackupTemplate{Schedule: fixtures.Yearly, MaxRetries: ptr.To[int32](1),
				ActiveDeadlineSeconds: ptr.To[int64](600), Storage: s3Storage(ns),
				Encryption: &cairnv1.EncryptionSpec{Recipients: cairnv1.RecipientsSource{
					ConfigMapKeyRef: &cairnv1.KeySelector{Name: "backup-keys", Key: "recipients"}}},
				Retention: &backupv1.RetentionPolicy{KeepDaily: 7, MinVerified: 1}},
			Verification: platformv1.VerificationSpec{
				EveryNBackups: ptr.To[int32](1),
				RestoreInto: platformv1.ScratchDatabase{Host: "127.0.0.1", Port: int32(e.port), Database: scratch,
					CredentialsSecretRef: cairnv1.LocalObjectReference{Name: "db"}},
				Checks:         []restorev1.Check{{Name: "row-counts", RowCountsMatchBackup: true}},
				Encryption:     &cairnv1.DecryptionSpec{IdentitySecretRef: cairnv1.KeySelector{Name: "dr-key", Key: "identity"}},
				TimeoutSeconds: ptr.To[int64](600),
			},
			Objectives:     platformv1.Objectives{RPO: metav1.Duration{Duration: 26 * time.Hour}},
			DeletionPolicy: backupv1.DeletionPolicyDelete,
		},
	}
	g.Expect(env.Client.Create(ctx, plan)).To(Succeed())
	bj := &backupv1.BackupJob{}
	bj.Namespace, bj.Name = ns, plan.Name
	g.Eventually(func() error { return env.Client.Get(ctx, client.ObjectKeyFromObject(bj), bj) }).WithTimeout(time.Minute).Should(Succeed())
	created := time.Now()
	fixtures.SetRunNow(g, env.Client, bj, "first")
	st := waitSucceeded(t, bj, created, 3*time.Minute)
	g.Expect(st.LastArtifact.EncryptedTo).To(Equal([]string{old.fp}))
	firstArtifact := st.LastArtifact.Path

	cur := waitPlanCondition(t, plan, platformv1.DecryptionVerifiedCondition, 4*time.Minute)
	dv := conditions.Get(cur, platformv1.DecryptionVerifiedCondition)
	g.Expect(dv.Status).To(Equal(metav1.ConditionTrue), "DecryptionVerified: %s", dv.Message)
	g.Expect(dv.Message).To(ContainSubstring(old.fp))
	g.Expect(conditions.Get(cur, platformv1.RecoverabilityVerifiedCondition).Status).To(Equal(metav1.ConditionTrue))
	first := cur.Status.LastVerification.RestoreJob
	rj := &restorev1.RestoreJob{}
	g.Expect(env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: first}, rj)).To(Succeed())
	g.Expect(rj.Status.Verified).To(BeTrue(), "the verification is recorded in the store")
	g.Expect(allObjects(t, bj)).To(ContainElement(ContainSubstring("/verified/")))

	// The recipients are rotated to a new key; the plan's identity stays.
	cm := &corev1.ConfigMap{}
	g.Expect(env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: "backup-keys"}, cm)).To(Succeed())
	cm.Data["recipients"] = rotated.pub
	g.Expect(env.Client.Update(ctx, cm)).To(Succeed())
	before := st.LastSuccessfulTime.Time
	fixtures.SetRunNow(g, env.Client, bj, "second")
	st = waitSucceeded(t, bj, before, 3*time.Minute)
	g.Expect(st.LastArtifact.EncryptedTo).To(Equal([]string{rotated.fp}), "the next backup goes to the new key")
	g.Eventually(func(g Gomega) string {
		p := &platformv1.ProtectionPlan{}
		g.Expect(env.Client.Get(ctx, client.ObjectKeyFromObject(plan), p)).To(Succeed())
		cur = p
		c := conditions.Get(p, platformv1.DecryptionVerifiedCondition)
		g.Expect(c).NotTo(BeNil())
		return string(c.Status) + "/" + c.Reason
	}).WithTimeout(4 * time.Minute).WithPolling(time.Second).Should(Equal("False/" + platformv1.IdentityCannotDecryptReason))
	dv = conditions.Get(cur, platformv1.DecryptionVerifiedCondition)
	g.Expect(dv.Message).To(And(ContainSubstring(rotated.fp), ContainSubstring("dr-key")))
	g.Expect(cur.Status.LastVerification.Reason).To(Equal(restorev1.RestoreJobEncryptionIdentityMismatchReason))
	g.Expect(conditions.Get(cur, platformv1.RecoverabilityVerifiedCondition).Status).To(Equal(metav1.ConditionFalse))
	exists, err := e.exists(scratch)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(exists).To(BeFalse(), "the scratch database was never created")
	// Both backups are of one day: keepDaily keeps the newest, minVerified
	// the first (the verified one).
	ret := fixtures.Get(g, env.Client, bj).Status.Retention
	g.Expect(ret).NotTo(BeNil())
	g.Expect(ret.Kept).To(ContainElement(backupv1.KeptArtifact{Artifact: path0(firstArtifact), Reasons: []string{"verified"}}),
		"status.retention: %+v", ret)
	t.Logf("rotated away: %s", dv.Message)

	// The series the CairnProtectionPlanIdentityCannotDecrypt alert
	// compares is 0.
	expr := alertExpr(t, "CairnProtectionPlanIdentityCannotDecrypt")
	g.Expect(expr).To(And(ContainSubstring("cairn_protectionplan_identity_decrypts"), HaveSuffix("== 0")))
	g.Eventually(planMetric(plan, "cairn_protectionplan_identity_decrypts")).WithTimeout(time.Minute).Should(Equal(0.0))

	// The store's catalog (status.catalog, listed by the operator) says
	// which artifact is encrypted to which key.
	g.Eventually(func() error {
		cur := fixtures.Get(g, env.Client, bj)
		if cur.Annotations == nil {
			cur.Annotations = map[string]string{}
		}
		cur.Annotations[backupv1.ListCatalogAnnotation] = "after-rotation"
		return env.Client.Update(ctx, cur)
	}).WithTimeout(30 * time.Second).Should(Succeed())
	var cat *backupv1.CatalogListing
	g.Eventually(func(g Gomega) string {
		cat = fixtures.Get(g, env.Client, bj).Status.Catalog
		g.Expect(cat).NotTo(BeNil())
		return cat.Request
	}).WithTimeout(2 * time.Minute).WithPolling(time.Second).Should(Equal("after-rotation"))
	g.Expect(cat.Message).To(BeEmpty())
	enc := map[string][]string{}
	for _, a := range cat.Artifacts {
		enc[path0(a.Path)] = a.EncryptedTo
	}
	g.Expect(enc).To(HaveKeyWithValue(path0(firstArtifact), []string{old.fp}), "catalog %+v", cat.Artifacts)
	g.Expect(enc).To(HaveKeyWithValue(path0(st.LastArtifact.Path), []string{rotated.fp}), "catalog %+v", cat.Artifacts)
}

func path0(p string) string { return p[strings.LastIndex(p, "/")+1:] }

// allObjects lists every object of bj's store (artifacts, manifests,
// verification records), as paths stored() reads.
func allObjects(t *testing.T, bj *backupv1.BackupJob) []string {
	t.Helper()
	var out []string
	if s := bj.Spec.Storage.S3; s != nil {
		for obj := range env.Servers.S3.Client().ListObjects(context.Background(), s.Bucket, minio.ListObjectsOptions{Prefix: s.Prefix, Recursive: true}) {
			if obj.Err != nil {
				t.Fatal(obj.Err)
			}
			out = append(out, obj.Key)
		}
		return out
	}
	root := pvcPath(bj, "")
	_ = filepath.WalkDir(root, func(p string, d os.DirEntry, err error) error {
		if err == nil && !d.IsDir() {
			rel, _ := filepath.Rel(root, p)
			out = append(out, rel)
		}
		return nil
	})
	return out
}
