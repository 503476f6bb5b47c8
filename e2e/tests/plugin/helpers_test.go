package plugin_test

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"io"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/minio/minio-go/v7"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	backupv1 "cairn.dev/apis/backup/v1"
	cairnv1 "cairn.dev/apis/meta/v1"
	"cairn.dev/e2e/dbcheck"
	"cairn.dev/e2e/install"
)

const orders = 2000

// result is one run of the plugin.
type result struct {
	code           int
	stdout, stderr string
}

// cairn runs `kubectl cairn args...` as user in namespace ns, with the
// admin's kubeconfig and kubectl's impersonation flag: exactly user's rights.
func cairn(t *testing.T, user, ns string, args ...string) result {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	full := append([]string{"--kubeconfig", env.Cluster.Kubeconfig, "--as", user, "-n", ns}, args...)
	cmd := exec.CommandContext(ctx, plugin, full...)
	var out, errOut bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errOut
	err := cmd.Run()
	r := result{stdout: out.String(), stderr: errOut.String()}
	var ee *exec.ExitError
	switch {
	case errors.As(err, &ee):
		r.code = ee.ExitCode()
	case err != nil:
		t.Fatalf("kubectl cairn %s: %v", strings.Join(args, " "), err)
	}
	t.Logf("kubectl cairn %s (as %s): exit %d\n%s%s", strings.Join(args, " "), user, r.code, r.stdout, r.stderr)
	return r
}

// ok runs the plugin and fails the test unless it exits 0.
func ok(t *testing.T, user, ns string, args ...string) string {
	t.Helper()
	r := cairn(t, user, ns, args...)
	if r.code != 0 {
		t.Fatalf("kubectl cairn %s: exit %d: %s", strings.Join(args, " "), r.code, r.stderr)
	}
	return r.stdout
}

// tenantNamespace creates a namespace with the Secrets "db" (PostgreSQL)
// and "s3", where alice has `edit` (Cairn's kinds through cairn-edit, and
// the Secrets her objects name) and olga `view` (cairn-view); it waits
// until the aggregated roles let alice create a BackupJob.
func tenantNamespace(t *testing.T) string {
	t.Helper()
	g := NewWithT(t)
	ctx := context.Background()
	nsObj := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: "plugin-"}}
	g.Expect(env.Client.Create(ctx, nsObj)).To(Succeed())
	ns := nsObj.Name
	g.Expect(env.Client.Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "db"},
		StringData: map[string]string{"username": install.PostgresUser, "password": install.PostgresPassword}})).To(Succeed())
	g.Expect(env.Client.Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "s3"},
		StringData: map[string]string{"accessKeyID": install.S3AccessKey, "secretAccessKey": install.S3SecretKey}})).To(Succeed())
	for user, role := range map[string]string{"alice": "edit", "olga": "view"} {
		g.Expect(env.Client.Create(ctx, &rbacv1.RoleBinding{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: user},
			RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: role},
			Subjects:   []rbacv1.Subject{{Kind: rbacv1.UserKind, APIGroup: rbacv1.GroupName, Name: user}},
		})).To(Succeed())
	}
	g.Eventually(func() int { return cairn(t, "alice", ns, "status").code }).WithTimeout(time.Minute).WithPolling(time.Second).
		Should(Equal(0), "the aggregation controller fills view/edit with cairn-view/cairn-edit")
	return ns
}

func dbName(ns, base string) string { return strings.ReplaceAll(ns, "-", "_") + "_" + base }

func postgresRef(db string) cairnv1.DatabaseRef {
	return cairnv1.DatabaseRef{Engine: cairnv1.PostgresEngine, Host: "127.0.0.1", Port: int32(env.Servers.Postgres.Port), Database: db,
		CredentialsSecretRef: cairnv1.LocalObjectReference{Name: "db"}}
}

func s3Storage(prefix string) cairnv1.StorageSpec {
	return cairnv1.StorageSpec{S3: &cairnv1.S3Storage{Endpoint: env.Servers.S3.Endpoint(), Bucket: install.Bucket, Prefix: prefix,
		Region: "us-east-1", Insecure: true, CredentialsSecretRef: cairnv1.LocalObjectReference{Name: "s3"}}}
}

// seed fills db with orders rows and returns its tables.
func seed(t *testing.T, db string) []dbcheck.Table {
	t.Helper()
	g := NewWithT(t)
	pg := env.Servers.Postgres
	g.Expect(dbcheck.SeedPostgres(pg, db, orders)).To(Succeed())
	want, err := dbcheck.PostgresTables(pg, db)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(want).NotTo(BeEmpty())
	return want
}

// storedArtifacts reads every dump artifact of bj's S3 store (not the
// catalog's own JSON) with the test's own S3 client: path → size and
// sha256 of its bytes.
func storedArtifacts(t *testing.T, bj *backupv1.BackupJob) map[string][2]string {
	t.Helper()
	s := bj.Spec.Storage.S3
	c := env.Servers.S3.Client()
	out := map[string][2]string{}
	for obj := range c.ListObjects(context.Background(), s.Bucket, minio.ListObjectsOptions{Prefix: s.Prefix, Recursive: true}) {
		if obj.Err != nil {
			t.Fatal(obj.Err)
		}
		if strings.HasSuffix(obj.Key, ".json") {
			continue
		}
		o, err := c.GetObject(context.Background(), s.Bucket, obj.Key, minio.GetObjectOptions{})
		if err != nil {
			t.Fatal(err)
		}
		b, err := io.ReadAll(o)
		o.Close()
		if err != nil {
			t.Fatal(err)
		}
		sum := sha256.Sum256(b)
		out[obj.Key] = [2]string{itoa(len(b)), "sha256:" + hex.EncodeToString(sum[:])}
	}
	return out
}
