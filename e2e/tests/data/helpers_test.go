package data_test

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/minio/minio-go/v7"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	backupv1 "cairn.dev/apis/backup/v1"
	cairnv1 "cairn.dev/apis/meta/v1"
	restorev1 "cairn.dev/apis/restore/v1"
	"cairn.dev/e2e/dbcheck"
	"cairn.dev/e2e/fixtures"
	"cairn.dev/e2e/install"
)

// engine is one database server of the harness, as the tests use it.
type engine struct {
	name       cairnv1.DatabaseEngine // postgres or mysql (the agent's name for MariaDB)
	port       int
	user, pass string
	sql        dbcheck.SQLRunner
	seed       func(db string, orders int) error
	tables     func(db string) ([]dbcheck.Table, error)
	exists     func(db string) (bool, error)
}

func postgres() engine {
	pg := env.Servers.Postgres
	return engine{name: "postgres", port: pg.Port, user: install.PostgresUser, pass: install.PostgresPassword, sql: pg,
		seed:   func(db string, n int) error { return dbcheck.SeedPostgres(pg, db, n) },
		tables: func(db string) ([]dbcheck.Table, error) { return dbcheck.PostgresTables(pg, db) },
		exists: func(db string) (bool, error) { return dbcheck.PostgresDatabaseExists(pg, db) }}
}

func mariadb() engine {
	m := env.Servers.MariaDB
	return engine{name: "mysql", port: m.Port, user: install.MariaDBUser, pass: install.MariaDBPassword, sql: m,
		seed:   func(db string, n int) error { return dbcheck.SeedMariaDB(m, db, n) },
		tables: func(db string) ([]dbcheck.Table, error) { return dbcheck.MariaDBTables(m, db) },
		exists: func(db string) (bool, error) { return dbcheck.MariaDBDatabaseExists(m, db) }}
}

// dbName makes a database name unique to the test's namespace.
func dbName(ns, base string) string {
	return strings.ReplaceAll(ns, "-", "_") + "_" + base
}

// namespace creates a namespace with the Secrets "db" (the engine's
// credentials) and "s3" (the S3 server's keys).
func namespace(t *testing.T, e engine) string {
	t.Helper()
	g := NewWithT(t)
	ctx := context.Background()
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: "data-"}}
	g.Expect(env.Client.Create(ctx, ns)).To(Succeed())
	g.Expect(env.Client.Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns.Name, Name: "db"},
		StringData: map[string]string{"username": e.user, "password": e.pass}})).To(Succeed())
	g.Expect(env.Client.Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns.Name, Name: "s3"},
		StringData: map[string]string{"accessKeyID": install.S3AccessKey, "secretAccessKey": install.S3SecretKey}})).To(Succeed())
	return ns.Name
}

func s3Storage(prefix string) cairnv1.StorageSpec {
	return cairnv1.StorageSpec{S3: &cairnv1.S3Storage{Endpoint: env.Servers.S3.Endpoint(), Bucket: install.Bucket, Prefix: prefix,
		Region: "us-east-1", Insecure: true, CredentialsSecretRef: cairnv1.LocalObjectReference{Name: "s3"}}}
}

// pvcStorage creates a PersistentVolume and a claim bound to it (the
// kube-controller-manager's binder binds them; the scheduler then places the
// pod); the pod runner backs the claim with a host folder.
func pvcStorage(t *testing.T, ns, claim string) cairnv1.StorageSpec {
	t.Helper()
	g := NewWithT(t)
	ctx := context.Background()
	pvName := ns + "-" + claim
	size := resource.MustParse("1Gi")
	g.Expect(env.Client.Create(ctx, &corev1.PersistentVolume{
		ObjectMeta: metav1.ObjectMeta{Name: pvName},
		Spec: corev1.PersistentVolumeSpec{
			Capacity:                      corev1.ResourceList{corev1.ResourceStorage: size},
			AccessModes:                   []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
			PersistentVolumeReclaimPolicy: corev1.PersistentVolumeReclaimRetain,
			StorageClassName:              "",
			ClaimRef:                      &corev1.ObjectReference{Namespace: ns, Name: claim},
			PersistentVolumeSource:        corev1.PersistentVolumeSource{HostPath: &corev1.HostPathVolumeSource{Path: "/nonexistent/" + pvName}},
		},
	})).To(Succeed())
	t.Cleanup(func() {
		_ = env.Client.Delete(context.Background(), &corev1.PersistentVolume{ObjectMeta: metav1.ObjectMeta{Name: pvName}})
	})
	g.Expect(env.Client.Create(ctx, &corev1.PersistentVolumeClaim{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: claim},
		Spec: corev1.PersistentVolumeClaimSpec{
			AccessModes:      []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
			StorageClassName: ptr.To(""),
			VolumeName:       pvName,
			Resources:        corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: size}},
		},
	})).To(Succeed())
	return cairnv1.StorageSpec{PVC: &cairnv1.PVCStorage{ClaimName: claim, SubPath: "cairn"}}
}

// backupJob backs up database db of e to storage.
func backupJob(ns, name string, e engine, db, schedule string, storage cairnv1.StorageSpec) *backupv1.BackupJob {
	bj := fixtures.BackupJob(ns, name, schedule, "127.0.0.1", 1)
	bj.Spec.Database = cairnv1.DatabaseRef{Engine: e.name, Host: "127.0.0.1", Port: int32(e.port), Database: db,
		CredentialsSecretRef: cairnv1.LocalObjectReference{Name: "db"}}
	bj.Spec.Storage = storage
	return bj
}

// restoreJob restores the newest backup of bj (or artifact) into db.
func restoreJob(bj *backupv1.BackupJob, name string, e engine, db, artifact string) *restorev1.RestoreJob {
	return &restorev1.RestoreJob{
		ObjectMeta: metav1.ObjectMeta{Namespace: bj.Namespace, Name: name},
		Spec: restorev1.RestoreJobSpec{
			Source: restorev1.RestoreSource{BackupJob: &restorev1.BackupJobSource{Name: bj.Name, Artifact: artifact}},
			Target: cairnv1.DatabaseRef{Engine: e.name, Host: "127.0.0.1", Port: int32(e.port), Database: db,
				CredentialsSecretRef: cairnv1.LocalObjectReference{Name: "db"}},
			MaxRetries:            ptr.To[int32](0),
			ActiveDeadlineSeconds: ptr.To[int64](600),
		},
	}
}

// waitBackups waits until bj recorded n successful runs in total
// (lastSuccessfulTime moved n times is not observable: runs counts the
// succeeded Jobs) and returns its status.
func waitSucceeded(t *testing.T, bj *backupv1.BackupJob, after time.Time, timeout time.Duration) backupv1.BackupJobStatus {
	t.Helper()
	g := NewWithT(t)
	var st backupv1.BackupJobStatus
	g.Eventually(func(g Gomega) {
		st = fixtures.Get(g, env.Client, bj).Status
		g.Expect(st.LastResult).NotTo(Equal(backupv1.RunFailed), "the backup failed: %s", lastMessage(st.Conditions))
		g.Expect(st.LastSuccessfulTime).NotTo(BeNil())
		g.Expect(st.LastSuccessfulTime.Time).To(BeTemporally(">", after))
		g.Expect(st.LastArtifact).NotTo(BeNil())
	}).WithTimeout(timeout).WithPolling(time.Second).Should(Succeed())
	return st
}

func waitRestore(t *testing.T, rj *restorev1.RestoreJob, timeout time.Duration) *restorev1.RestoreJob {
	t.Helper()
	g := NewWithT(t)
	got := &restorev1.RestoreJob{}
	g.Eventually(func(g Gomega) {
		g.Expect(env.Client.Get(context.Background(), client.ObjectKeyFromObject(rj), got)).To(Succeed())
		g.Expect(got.Status.Phase).To(BeElementOf(restorev1.PhaseSucceeded, restorev1.PhaseFailed))
	}).WithTimeout(timeout).WithPolling(time.Second).Should(Succeed())
	return got
}

func lastMessage(conds []metav1.Condition) string {
	var parts []string
	for _, c := range conds {
		parts = append(parts, fmt.Sprintf("%s=%s %s: %s", c.Type, c.Status, c.Reason, c.Message))
	}
	return strings.Join(parts, "; ")
}

// stored reads an artifact's bytes from its store.
func stored(t *testing.T, bj *backupv1.BackupJob, path string) []byte {
	t.Helper()
	if s := bj.Spec.Storage.S3; s != nil {
		obj, err := env.Servers.S3.Client().GetObject(context.Background(), s.Bucket, path, minio.GetObjectOptions{})
		if err != nil {
			t.Fatal(err)
		}
		defer obj.Close()
		b, err := io.ReadAll(obj)
		if err != nil {
			t.Fatalf("reading s3://%s/%s: %v", s.Bucket, path, err)
		}
		return b
	}
	b, err := os.ReadFile(pvcPath(bj, path))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func pvcPath(bj *backupv1.BackupJob, path string) string {
	p := bj.Spec.Storage.PVC
	// pvcStorage's volume: its folder outlives the claim and its namespace.
	return filepath.Join(env.Cluster.Pods.VolumeDir(bj.Namespace+"-"+p.ClaimName), p.SubPath, path)
}

// artifacts lists the stored dump artifacts of bj (not its catalog).
func artifacts(t *testing.T, bj *backupv1.BackupJob) []string {
	t.Helper()
	var out []string
	if s := bj.Spec.Storage.S3; s != nil {
		for obj := range env.Servers.S3.Client().ListObjects(context.Background(), s.Bucket, minio.ListObjectsOptions{Prefix: s.Prefix, Recursive: true}) {
			if obj.Err != nil {
				t.Fatal(obj.Err)
			}
			if !strings.HasSuffix(obj.Key, ".json") {
				out = append(out, obj.Key)
			}
		}
		return out
	}
	root := pvcPath(bj, "")
	_ = filepath.WalkDir(root, func(p string, d os.DirEntry, err error) error {
		if err == nil && !d.IsDir() && !strings.HasSuffix(p, ".json") {
			rel, _ := filepath.Rel(root, p)
			out = append(out, rel)
		}
		return nil
	})
	return out
}

func sha256sum(b []byte) string {
	h := sha256.Sum256(b)
	return "sha256:" + hex.EncodeToString(h[:])
}

func itoa(n int) string { return strconv.Itoa(n) }
