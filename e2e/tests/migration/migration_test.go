package migration_test

import (
	"context"
	"strconv"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	cairnv1 "cairn.dev/apis/meta/v1"
	migrationv1 "cairn.dev/apis/migration/v1"
	"cairn.dev/e2e/dbcheck"
	"cairn.dev/e2e/install"
)

// A Full PostgreSQL migration with a direct transfer: precheck, copy,
// verification and an Auto cutover that switches the application's Secret.
// The target equals the source by the test's own check, and the
// operator's verification says every table matches.
func TestPostgresDirectMigration(t *testing.T) { migrate(t, migrationv1.TransferSpec{}) }

// The same through a store (S3): export, import, and verification of the
// target against the inventory export took in the dump's snapshot.
func TestPostgresStoreMigration(t *testing.T) {
	migrate(t, storeTransfer())
}

func migrate(t *testing.T, transfer migrationv1.TransferSpec) {
	migrateEngine(t, cairnv1.PostgresEngine, transfer)
}

// A Full MariaDB migration with a direct transfer (mysqldump streamed into
// mysql), verified by the operator and independently by the test.
func TestMariaDBDirectMigration(t *testing.T) {
	migrateEngine(t, cairnv1.MySQLEngine, migrationv1.TransferSpec{})
}

// The same through a store (S3): mysqldump → zstd → S3 in the export Job,
// the artifact's checksum checked and streamed into mysql by the import Job.
func TestMariaDBStoreMigration(t *testing.T) {
	migrateEngine(t, cairnv1.MySQLEngine, migrationv1.TransferSpec{Method: migrationv1.TransferStore, Storage: &cairnv1.StorageSpec{S3: &cairnv1.S3Storage{
		Endpoint: env.Servers.S3.Endpoint(), Bucket: install.Bucket, Prefix: "migrations", Region: "us-east-1", Insecure: true,
		CredentialsSecretRef: cairnv1.LocalObjectReference{Name: "s3"}}}})
}

// db is one engine's server as the tests use it.
type db struct {
	engine     cairnv1.DatabaseEngine
	server     dbcheck.SQLRunner
	port       int
	user, pass string
	tables     func(dbcheck.SQLRunner, string) ([]dbcheck.Table, error)
	seed       func(dbcheck.SQLRunner, string, int) error
}

func engine(e cairnv1.DatabaseEngine) db {
	if e == cairnv1.MySQLEngine {
		m := env.Servers.MariaDB
		return db{e, m, m.Port, install.MariaDBUser, install.MariaDBPassword, dbcheck.MariaDBTables, dbcheck.SeedMariaDB}
	}
	pg := env.Servers.Postgres
	return db{e, pg, pg.Port, install.PostgresUser, install.PostgresPassword, dbcheck.PostgresTables, dbcheck.SeedPostgres}
}

// setup creates a namespace with the Secrets a MigrationJob names, seeds the
// source with orders orders and returns the MigrationJob (not created yet),
// the source's tables and the target database's name.
func setup(t *testing.T, g Gomega, d db, orders int, transfer migrationv1.TransferSpec, cutover migrationv1.CutoverSpec) (*migrationv1.MigrationJob, []dbcheck.Table, string) {
	ctx := context.Background()
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: "migration-"}}
	g.Expect(env.Client.Create(ctx, ns)).To(Succeed())
	name := func(base string) string { return strings.ReplaceAll(ns.Name, "-", "_") + "_" + base }
	src, dst := name("orders"), name("orders_new")
	g.Expect(d.seed(d.server, src, orders)).To(Succeed())
	want, err := d.tables(d.server, src)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(want).NotTo(BeEmpty())

	g.Expect(env.Client.Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns.Name, Name: "db"},
		StringData: map[string]string{"username": d.user, "password": d.pass}})).To(Succeed())
	g.Expect(env.Client.Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns.Name, Name: "s3"},
		StringData: map[string]string{"accessKeyID": install.S3AccessKey, "secretAccessKey": install.S3SecretKey}})).To(Succeed())
	// app-db opts in to switchSecret (docs/migration.md): labelled, and the
	// operator granted cairn-migration-secret-switcher in the namespace.
	g.Expect(env.Client.Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns.Name, Name: "app-db",
		Labels: map[string]string{migrationv1.SwitchableLabel: migrationv1.SwitchableValue}},
		StringData: map[string]string{"host": "127.0.0.1", "port": strconv.Itoa(d.port), "database": src}})).To(Succeed())
	g.Expect(env.Client.Create(ctx, &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Namespace: ns.Name, Name: "cairn-migration-secret-switcher"},
		RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "cairn-migration-secret-switcher"},
		Subjects: []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Name: "cairn-migration-controller-manager", Namespace: "cairn-system"}},
	})).To(Succeed())
	ref := func(name string) cairnv1.DatabaseRef {
		return cairnv1.DatabaseRef{Engine: d.engine, Host: "127.0.0.1", Port: int32(d.port), Database: name,
			CredentialsSecretRef: cairnv1.LocalObjectReference{Name: "db"}}
	}
	return &migrationv1.MigrationJob{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns.Name, Name: "orders"},
		Spec: migrationv1.MigrationJobSpec{
			Source: ref(src), Target: migrationv1.TargetDatabase{DatabaseRef: ref(dst)}, Transfer: transfer, Cutover: cutover,
		},
	}, want, dst
}

func migrateEngine(t *testing.T, e cairnv1.DatabaseEngine, transfer migrationv1.TransferSpec) {
	g := NewWithT(t)
	ctx := context.Background()
	d := engine(e)
	mj, want, dst := setup(t, g, d, 1000, transfer,
		migrationv1.CutoverSpec{Mode: migrationv1.CutoverAuto, WritersStopped: true, SwitchSecret: &cairnv1.LocalObjectReference{Name: "app-db"}})
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: mj.Namespace}}
	g.Expect(env.Client.Create(ctx, mj)).To(Succeed())

	cur := &migrationv1.MigrationJob{}
	g.Eventually(func(g Gomega) migrationv1.Phase {
		g.Expect(env.Client.Get(ctx, client.ObjectKeyFromObject(mj), cur)).To(Succeed())
		return cur.Status.Phase
	}).WithTimeout(5 * time.Minute).WithPolling(time.Second).Should(BeElementOf(migrationv1.PhaseSucceeded, migrationv1.PhaseFailed))
	g.Expect(cur.Status.Phase).To(Equal(migrationv1.PhaseSucceeded), "conditions: %+v", cur.Status.Conditions)

	// The operator's verification: every table, both directions.
	v := cur.Status.Verification
	g.Expect(v).NotTo(BeNil())
	g.Expect(v.Mismatched).To(BeZero())
	g.Expect(v.Tables).To(Equal(int32(len(want))))
	g.Expect(cur.Status.Precheck.Passed).To(BeTrue())
	g.Expect(cur.Status.Progress.TablesDone).To(Equal(int32(len(want))))
	// The test's own check: the target equals the source.
	got, err := d.tables(d.server, dst)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(got).To(Equal(want))
	// The declared cutover: the application's Secret points at the target.
	sec := &corev1.Secret{}
	g.Expect(env.Client.Get(ctx, client.ObjectKey{Namespace: ns.Name, Name: "app-db"}, sec)).To(Succeed())
	g.Expect(string(sec.Data["database"])).To(Equal(dst))
	t.Logf("migrated %d tables (%d bytes) in %s: %s", len(want), cur.Status.Progress.Bytes,
		cur.Status.CompletionTime.Sub(cur.Status.StartTime.Time), v.Summary)

	// Deletion removes the step Jobs.
	g.Expect(env.Client.Delete(ctx, mj)).To(Succeed())
	g.Eventually(func() bool {
		return apierrors.IsNotFound(env.Client.Get(ctx, client.ObjectKeyFromObject(mj), &migrationv1.MigrationJob{}))
	}).WithTimeout(time.Minute).Should(BeTrue())
}
