package soak

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"cairn.dev/agent/test/load"
	backupv1 "cairn.dev/apis/backup/v1"
	cairnv1 "cairn.dev/apis/meta/v1"
	migrationv1 "cairn.dev/apis/migration/v1"
	platformv1 "cairn.dev/apis/platform/v1"
	restorev1 "cairn.dev/apis/restore/v1"
	"cairn.dev/e2e/dbcheck"
	"cairn.dev/e2e/install"
)

// The soak's workload: the demo's, faster — a PostgreSQL and a MariaDB
// BackupJob every minute, a ProtectionPlan backing up every minute and
// verifying every backup, RestoreJobs of the newest backups in turn, a
// Continuous MigrationJob under a write load.

// Names of the workload's objects and databases.
const (
	// Orders is the source database of the backups on both servers (the
	// demo's shop); LiveDB the migration's source, LiveTarget its target.
	OrdersDB   = "orders"
	LiveDB     = "live"
	LiveTarget = "live_v2"
	// Orders in the shop (a tenth as many customers, two items each).
	orders = 20000

	pgBackup, mariaBackup = "orders-pg", "orders-maria"
	planName              = "plan"
	migrationName         = "live"
	// loadRate is the write load on the migration's source, rows/s.
	loadRate = 20
)

var everyMinute = "* * * * *"

type workload struct {
	env       *install.Env
	ns        string
	s3        string // the S3 endpoint as the Jobs reach it (the gate)
	rec       *recorder
	logf      func(string, ...any)
	load      *load.Load
	restores  int
	mu        sync.Mutex
	pending   map[string]string // RestoreJob → its engine, until compared or failed
	sourceOf  map[string][]dbcheck.Table
	createdBJ time.Time
}

func (w *workload) ref(engine cairnv1.DatabaseEngine, db string) cairnv1.DatabaseRef {
	s := w.env.Servers
	port, secret := s.Postgres.Port, "pg"
	if engine == cairnv1.MySQLEngine {
		port, secret = s.MariaDB.Port, "maria"
	}
	return cairnv1.DatabaseRef{Engine: engine, Host: "127.0.0.1", Port: int32(port), Database: db,
		CredentialsSecretRef: cairnv1.LocalObjectReference{Name: secret}}
}

func (w *workload) storage(prefix string) cairnv1.StorageSpec {
	return cairnv1.StorageSpec{S3: &cairnv1.S3Storage{Endpoint: w.s3, Bucket: install.Bucket, Prefix: prefix, Region: "us-east-1",
		Insecure: true, CredentialsSecretRef: cairnv1.LocalObjectReference{Name: "s3"}}}
}

func (w *workload) tables(engine cairnv1.DatabaseEngine, db string) ([]dbcheck.Table, error) {
	if engine == cairnv1.MySQLEngine {
		return dbcheck.MariaDBTables(w.env.Servers.MariaDB, db)
	}
	return dbcheck.PostgresTables(w.env.Servers.Postgres, db)
}

// setUp seeds the databases and creates the namespace, its Secrets and the
// workload's objects (each BackupJob with a run-now request, so the first
// backups start at once), starts the write load, and waits until each
// BackupJob has backed up once.
func (w *workload) setUp(ctx context.Context, soakFor time.Duration) error {
	s := w.env.Servers
	start := time.Now()
	var errs [3]error
	var wg sync.WaitGroup
	wg.Add(3)
	go func() { defer wg.Done(); errs[0] = dbcheck.SeedPostgres(s.Postgres, OrdersDB, orders) }()
	go func() { defer wg.Done(); errs[1] = dbcheck.SeedMariaDB(s.MariaDB, OrdersDB, orders) }()
	go func() {
		defer wg.Done()
		if errs[2] = dbcheck.SeedPostgres(s.Postgres, LiveDB, orders/10); errs[2] == nil {
			_, errs[2] = s.Postgres.SQL(LiveDB, `CREATE TABLE live_events (id bigserial PRIMARY KEY, v int NOT NULL, at timestamptz NOT NULL DEFAULT now());
INSERT INTO live_events (v) SELECT g FROM generate_series(1, 20000) g`)
		}
	}()
	wg.Wait()
	if err := errors.Join(errs[:]...); err != nil {
		return fmt.Errorf("soak: seeding: %w", err)
	}
	w.sourceOf = map[string][]dbcheck.Table{}
	for _, e := range []cairnv1.DatabaseEngine{cairnv1.PostgresEngine, cairnv1.MySQLEngine} {
		t, err := w.tables(e, OrdersDB)
		if err != nil {
			return err
		}
		w.sourceOf[string(e)] = t
	}
	w.logf("seeded %s on PostgreSQL and MariaDB (%d orders) and %s (%d orders + 20000 live_events) in %s",
		OrdersDB, orders, LiveDB, orders/10, time.Since(start).Round(time.Millisecond))

	c := w.env.Client
	objs := []client.Object{
		&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: w.ns}},
		&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: w.ns, Name: "pg"},
			StringData: map[string]string{"username": s.Postgres.User, "password": s.Postgres.Password}},
		&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: w.ns, Name: "maria"},
			StringData: map[string]string{"username": s.MariaDB.User, "password": s.MariaDB.Password}},
		&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: w.ns, Name: "s3"},
			StringData: map[string]string{"accessKeyID": install.S3AccessKey, "secretAccessKey": install.S3SecretKey}},
		w.backupJob(pgBackup, cairnv1.PostgresEngine, backupv1.DeletionPolicyRetain),
		w.backupJob(mariaBackup, cairnv1.MySQLEngine, backupv1.DeletionPolicyDelete),
		w.plan(),
		w.migration(),
	}
	for _, o := range objs {
		if err := c.Create(ctx, o); err != nil {
			return fmt.Errorf("soak: creating %T %s: %w", o, o.GetName(), err)
		}
	}
	w.createdBJ = time.Now()
	dsn := fmt.Sprintf("host=127.0.0.1 port=%d dbname=%s user=%s password=%s sslmode=disable", s.Postgres.Port, LiveDB, s.Postgres.User, s.Postgres.Password)
	var err error
	if w.load, err = load.Start(dsn, "live_events", loadRate, soakFor+30*time.Minute); err != nil {
		return fmt.Errorf("soak: starting the write load: %w", err)
	}
	w.logf("created BackupJobs %s (PostgreSQL, Retain) and %s (MariaDB, Delete), ProtectionPlan %s and the Continuous MigrationJob %s (%s → %s, %d rows/s written to its source) in namespace %s",
		pgBackup, mariaBackup, planName, migrationName, LiveDB, LiveTarget, loadRate, w.ns)
	// The plan's BackupJob exists once the orchestrator made it: ask it for
	// a run now too.
	if err := w.runNow(ctx, planName); err != nil {
		return err
	}
	for _, n := range []string{pgBackup, mariaBackup, planName} {
		if err := w.waitBackedUp(ctx, n, 3*time.Minute); err != nil {
			return err
		}
	}
	w.logf("first backups of %s, %s and %s recorded %s after their creation", pgBackup, mariaBackup, planName, time.Since(w.createdBJ).Round(time.Second))
	return nil
}

func (w *workload) backupJob(name string, engine cairnv1.DatabaseEngine, policy backupv1.DeletionPolicy) *backupv1.BackupJob {
	return &backupv1.BackupJob{
		ObjectMeta: metav1.ObjectMeta{Namespace: w.ns, Name: name, Annotations: map[string]string{backupv1.RunNowAnnotation: "first"}},
		Spec: backupv1.BackupJobSpec{
			Database: w.ref(engine, OrdersDB), Schedule: everyMinute, TimeZone: "Asia/Shanghai",
			RetentionDays: 14, MaxRetries: ptr.To[int32](2), ActiveDeadlineSeconds: ptr.To[int64](600),
			Storage: w.storage("soak-" + name), DeletionPolicy: policy,
		},
	}
}

func (w *workload) plan() *platformv1.ProtectionPlan {
	scratch := w.ref(cairnv1.PostgresEngine, "orders_verify")
	return &platformv1.ProtectionPlan{
		ObjectMeta: metav1.ObjectMeta{Namespace: w.ns, Name: planName},
		Spec: platformv1.ProtectionPlanSpec{
			Database: w.ref(cairnv1.PostgresEngine, OrdersDB), TimeZone: "Asia/Shanghai",
			Backup: platformv1.BackupTemplate{Schedule: everyMinute, RetentionDays: 14, MaxRetries: ptr.To[int32](2),
				ActiveDeadlineSeconds: ptr.To[int64](600), Storage: w.storage("soak-plan")},
			Verification: platformv1.VerificationSpec{EveryNBackups: ptr.To[int32](1),
				RestoreInto: platformv1.ScratchDatabase{Host: scratch.Host, Port: scratch.Port, Database: scratch.Database,
					CredentialsSecretRef: scratch.CredentialsSecretRef},
				Checks: []restorev1.Check{{Name: "has-orders", SQL: "select count(*) from orders", AtLeast: ptr.To[int64](1)},
					{Name: "row-counts", RowCountsMatchBackup: true}},
				TimeoutSeconds: ptr.To[int64](600)},
			Objectives:     platformv1.Objectives{RPO: metav1.Duration{Duration: 10 * time.Minute}},
			DeletionPolicy: backupv1.DeletionPolicyRetain,
		},
	}
}

func (w *workload) migration() *migrationv1.MigrationJob {
	return &migrationv1.MigrationJob{
		ObjectMeta: metav1.ObjectMeta{Namespace: w.ns, Name: migrationName},
		Spec: migrationv1.MigrationJobSpec{
			Source: w.ref(cairnv1.PostgresEngine, LiveDB),
			Target: migrationv1.TargetDatabase{DatabaseRef: w.ref(cairnv1.PostgresEngine, LiveTarget)},
			Mode:   migrationv1.ModeContinuous, Verify: migrationv1.VerifyChecksum,
			Cutover: migrationv1.CutoverSpec{Mode: migrationv1.CutoverManual},
		},
	}
}

// runNow sets a run-now request on BackupJob name once it exists.
func (w *workload) runNow(ctx context.Context, name string) error {
	deadline := time.Now().Add(time.Minute)
	for {
		bj := &backupv1.BackupJob{}
		err := w.env.Client.Get(ctx, client.ObjectKey{Namespace: w.ns, Name: name}, bj)
		if err == nil {
			patch := client.MergeFrom(bj.DeepCopy())
			if bj.Annotations == nil {
				bj.Annotations = map[string]string{}
			}
			bj.Annotations[backupv1.RunNowAnnotation] = "first"
			if err = w.env.Client.Patch(ctx, bj, patch); err == nil {
				return nil
			}
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("soak: run-now on BackupJob %s: %w", name, err)
		}
		time.Sleep(500 * time.Millisecond)
	}
}

func (w *workload) waitBackedUp(ctx context.Context, name string, timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	bj := &backupv1.BackupJob{}
	for {
		if err := w.env.Client.Get(ctx, client.ObjectKey{Namespace: w.ns, Name: name}, bj); err == nil && bj.Status.LastArtifact != nil {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("soak: BackupJob %s has no successful backup after %s (status %+v)", name, timeout, bj.Status)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(time.Second):
		}
	}
}

// restoreLoop creates a RestoreJob of the newest backup every `every`,
// PostgreSQL and MariaDB in turn, into a new database, and compares each
// one that succeeded with its source (then drops it), until ctx ends.
func (w *workload) restoreLoop(ctx context.Context, every time.Duration) {
	next := time.Now()
	for {
		if !time.Now().Before(next) {
			if err := w.createRestore(ctx); err != nil {
				w.logf("creating a RestoreJob: %v (tried again at the next turn)", err)
			}
			next = next.Add(every)
		}
		w.comparePending(ctx)
		select {
		case <-ctx.Done():
			return
		case <-time.After(2 * time.Second):
		}
	}
}

func (w *workload) createRestore(ctx context.Context) error {
	w.restores++
	n := w.restores
	engine, source := cairnv1.PostgresEngine, pgBackup
	if n%2 == 0 {
		engine, source = cairnv1.MySQLEngine, mariaBackup
	}
	rj := &restorev1.RestoreJob{
		ObjectMeta: metav1.ObjectMeta{Namespace: w.ns, Name: "soak-r-" + strconv.Itoa(n)},
		Spec: restorev1.RestoreJobSpec{
			Source:     restorev1.RestoreSource{BackupJob: &restorev1.BackupJobSource{Name: source}},
			Target:     w.ref(engine, "restored_"+strconv.Itoa(n)),
			MaxRetries: ptr.To[int32](2), ActiveDeadlineSeconds: ptr.To[int64](600),
		},
	}
	if err := w.env.Client.Create(ctx, rj); err != nil {
		return err
	}
	w.mu.Lock()
	w.pending[rj.Name] = string(engine)
	w.mu.Unlock()
	return nil
}

// comparePending compares the target of each pending RestoreJob that
// succeeded with its source, table by table, and drops it.
func (w *workload) comparePending(ctx context.Context) {
	w.mu.Lock()
	names := map[string]string{}
	for k, v := range w.pending {
		names[k] = v
	}
	w.mu.Unlock()
	for name, engine := range names {
		rj := &restorev1.RestoreJob{}
		if err := w.env.Client.Get(ctx, client.ObjectKey{Namespace: w.ns, Name: name}, rj); err != nil {
			continue // the API server restarting: next time
		}
		switch rj.Status.Phase {
		case restorev1.PhaseSucceeded:
		case restorev1.PhaseFailed:
			w.done(name)
			continue
		default:
			continue
		}
		got, err := w.tables(cairnv1.DatabaseEngine(engine), rj.Spec.Target.Database)
		if err != nil {
			w.logf("reading %s's target %s: %v (tried again)", name, rj.Spec.Target.Database, err)
			continue
		}
		diffs := differences(w.sourceOf[engine], got)
		w.rec.compared(name, diffs)
		w.logf("%s (%s, %s): %d tables, %s", name, engine, rj.Status.Artifact.Path, len(got), map[bool]string{true: "equal to the source", false: fmt.Sprintf("DIFFERS: %v", diffs)}[len(diffs) == 0])
		drop := "DROP DATABASE " + rj.Spec.Target.Database
		if engine == string(cairnv1.MySQLEngine) {
			_, err = w.env.Servers.MariaDB.SQL("", drop)
		} else {
			_, err = w.env.Servers.Postgres.SQL("postgres", drop)
		}
		if err != nil {
			w.logf("dropping %s: %v", rj.Spec.Target.Database, err)
		}
		w.done(name)
	}
}

func (w *workload) done(name string) {
	w.mu.Lock()
	delete(w.pending, name)
	w.mu.Unlock()
}

func (w *workload) pendingRestores() int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return len(w.pending)
}

// differences lists the tables of got that differ from want (rows, content
// checksum), and those missing on either side.
func differences(want, got []dbcheck.Table) []string {
	byName := map[string]dbcheck.Table{}
	for _, t := range got {
		byName[t.Name] = t
	}
	var out []string
	for _, t := range want {
		g, ok := byName[t.Name]
		switch {
		case !ok:
			out = append(out, t.Name+": missing")
		case g != t:
			out = append(out, fmt.Sprintf("%s: %d rows %s, source %d rows %s", t.Name, g.Rows, g.Checksum, t.Rows, t.Checksum))
		}
		delete(byName, t.Name)
	}
	for n := range byName {
		out = append(out, n+": not in the source")
	}
	return out
}
