package main

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/minio/minio-go/v7"
	"github.com/minio/minio-go/v7/pkg/credentials"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"

	backupv1 "cairn.dev/apis/backup/v1"
	platformv1 "cairn.dev/apis/platform/v1"
	restorev1 "cairn.dev/apis/restore/v1"
	"cairn.dev/e2e/dbcheck"
	"cairn.dev/e2e/install"
	"cairn.dev/libs/conditions"
)

// demoOrders is how many orders the sample database gets (a tenth as many
// customers, two items per order).
const demoOrders = 20000

// dbServer is one of the plane's database servers as the demo uses it.
type dbServer struct {
	label          string // "PostgreSQL 15", "MariaDB"
	port           int
	user, password string
	seed           func(db string, orders int) error
	tables         func(db string) ([]dbcheck.Table, error)
}

// server is the plane's server for a sample's engine (postgres, or mysql:
// MariaDB).
func (pl *planeState) server(engine string) (*dbServer, error) {
	switch engine {
	case "postgres":
		pg := pl.Postgres
		return &dbServer{label: "PostgreSQL 15", port: pg.Port, user: pg.User, password: pg.Password,
			seed:   func(db string, n int) error { return dbcheck.SeedPostgres(pg, db, n) },
			tables: func(db string) ([]dbcheck.Table, error) { return dbcheck.PostgresTables(pg, db) }}, nil
	case "mysql":
		m := pl.MariaDB
		return &dbServer{label: "MariaDB", port: m.Port, user: m.User, password: m.Password,
			seed:   func(db string, n int) error { return dbcheck.SeedMariaDB(m, db, n) },
			tables: func(db string) ([]dbcheck.Table, error) { return dbcheck.MariaDBTables(m, db) }}, nil
	}
	return nil, fmt.Errorf("the demo has no %q server", engine)
}

// seed creates each sample BackupJob's database with real rows on its
// engine's server, all at once.
func seed(pl *planeState, s *samples) error {
	errs := make([]error, len(s.pairs))
	var wg sync.WaitGroup
	for i, p := range s.pairs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[i] = seedOne(pl, p)
		}()
	}
	wg.Wait()
	return errors.Join(errs...)
}

func seedOne(pl *planeState, p *pair) error {
	srv, err := pl.server(p.engine())
	if err != nil {
		return err
	}
	db, _, _ := unstructured.NestedString(p.backup.Object, "spec", "database", "database")
	if err := srv.seed(db, demoOrders); err != nil {
		return fmt.Errorf("creating the sample database %s on %s: %w", db, srv.label, err)
	}
	tables, err := srv.tables(db)
	if err != nil {
		return err
	}
	var rows int64
	for _, t := range tables {
		rows += t.Rows
	}
	logf("created database %s on the local %s: %d tables, %d rows", db, srv.label, len(tables), rows)
	return nil
}

// mapSamples points the samples at the local servers, as a user points them
// at theirs — database hosts and ports, S3 endpoint, the Secrets' values —
// and prints the mapping.
func mapSamples(s *samples, pl *planeState) error {
	set := func(o *unstructured.Unstructured, v any, path ...string) error {
		return unstructured.SetNestedField(o.Object, v, path...)
	}
	str := func(o *unstructured.Unstructured, path ...string) string {
		v, _, _ := unstructured.NestedString(o.Object, path...)
		return v
	}
	var endpoint string
	// What each Service (host:port) and Secret of the samples becomes.
	hosts := map[string]string{}
	logWhat := map[string][]string{}
	var hostOrder []string
	dbSecrets := map[string]*dbServer{}
	s3Secrets := map[string]bool{}
	mapDB := func(o *unstructured.Unstructured, engine, what string, path ...string) error {
		srv, err := pl.server(engine)
		if err != nil {
			return err
		}
		host := str(o, append(path, "host")...)
		port, _, _ := unstructured.NestedFieldNoCopy(o.Object, append(path, "port")...)
		svc := fmt.Sprintf("%s:%v", host, port)
		if _, ok := hosts[svc]; !ok {
			hostOrder = append(hostOrder, svc)
			hosts[svc] = fmt.Sprintf("127.0.0.1:%d (%s)", srv.port, srv.label)
		}
		logWhat[svc] = append(logWhat[svc], what)
		if sec := str(o, append(path, "credentialsSecretRef", "name")...); sec != "" {
			dbSecrets[sec] = srv
		}
		return errors.Join(set(o, "127.0.0.1", append(path, "host")...), set(o, int64(srv.port), append(path, "port")...))
	}
	mapS3 := func(o *unstructured.Unstructured, path ...string) error {
		bucket := str(o, append(path, "bucket")...)
		if bucket != install.Bucket {
			return fmt.Errorf("the sample %s %s's bucket %q is not the demo's %q", o.GetKind(), o.GetName(), bucket, install.Bucket)
		}
		endpoint = str(o, append(path, "endpoint")...)
		if sec := str(o, append(path, "credentialsSecretRef", "name")...); sec != "" {
			s3Secrets[sec] = true
		}
		return errors.Join(set(o, pl.S3Endpoint, append(path, "endpoint")...), set(o, true, append(path, "insecure")...))
	}
	var errs []error
	for _, p := range append(append([]*pair{}, s.pairs...), s.pitr) {
		errs = append(errs,
			mapDB(p.backup, p.engine(), "BackupJob "+p.backup.GetName(), "spec", "database"),
			mapS3(p.backup, "spec", "storage", "s3"),
			mapDB(p.restore, str(p.restore, "spec", "target", "engine"), "RestoreJob "+p.restore.GetName()+" target", "spec", "target"))
	}
	planEngine := str(s.plan, "spec", "database", "engine")
	errs = append(errs,
		mapDB(s.plan, planEngine, "ProtectionPlan "+s.plan.GetName(), "spec", "database"),
		mapS3(s.plan, "spec", "backup", "storage", "s3"))
	// The plan's scratch database is on the protected server unless it names
	// another (it does not give the port: the engine's default).
	scratch := []string{"spec", "verification", "restoreInto"}
	if _, ok, _ := unstructured.NestedFieldNoCopy(s.plan.Object, append(scratch, "port")...); !ok {
		errs = append(errs, set(s.plan, int64(5432), append(scratch, "port")...))
	}
	errs = append(errs, mapDB(s.plan, planEngine, "the plan's scratch database", scratch...))
	// The plan's migration (start: false, so nothing is created) must name
	// the plan's database as its source: admission refuses any other.
	if _, ok, _ := unstructured.NestedMap(s.plan.Object, "spec", "migration", "template", "source"); ok {
		errs = append(errs, mapDB(s.plan, planEngine, "the plan's migration source", "spec", "migration", "template", "source"))
	}
	errs = append(errs, mapMigration(s, pl, mapDB))
	if err := errors.Join(errs...); err != nil {
		return err
	}
	var secretLines []string
	for _, sec := range s.secrets {
		if srv, ok := dbSecrets[sec.GetName()]; ok {
			if err := set(sec, map[string]any{"username": srv.user, "password": srv.password}, "stringData"); err != nil {
				return err
			}
			secretLines = append(secretLines, fmt.Sprintf("  Secret %s -> user %s of the local %s", sec.GetName(), srv.user, srv.label))
		} else if s3Secrets[sec.GetName()] {
			if err := set(sec, map[string]any{"accessKeyID": install.S3AccessKey, "secretAccessKey": install.S3SecretKey}, "stringData"); err != nil {
				return err
			}
			secretLines = append(secretLines, fmt.Sprintf("  Secret %s -> the S3 server's key", sec.GetName()))
		}
	}
	logf("samples mapped to the local servers:")
	for _, svc := range hostOrder {
		logf("  %s (%s) -> %s", svc, strings.Join(logWhat[svc], ", "), hosts[svc])
	}
	logf("  %s (https) -> http://%s (versitygw), bucket %s", endpoint, pl.S3Endpoint, install.Bucket)
	for _, l := range secretLines {
		logf("%s", l)
	}
	return nil
}

// report prints what a BackupJob's first backup stored and what its
// RestoreJob made of it: the artifact as the BackupJob reports it and as the
// store holds it, and each table of the source and the restored database
// side by side.
func report(ctx context.Context, c client.Client, pl *planeState, p *pair) error {
	bj := &backupv1.BackupJob{}
	if err := c.Get(ctx, client.ObjectKey{Namespace: p.backup.GetNamespace(), Name: p.backup.GetName()}, bj); err != nil {
		return err
	}
	rj := &restorev1.RestoreJob{}
	if err := c.Get(ctx, client.ObjectKey{Namespace: p.restore.GetNamespace(), Name: p.restore.GetName()}, rj); err != nil {
		return err
	}
	srv, err := pl.server(string(bj.Spec.Database.Engine))
	if err != nil {
		return err
	}
	art := rj.Status.Artifact
	if art == nil {
		return fmt.Errorf("restorejob/%s has no artifact in its status", rj.Name)
	}
	st := bj.Spec.Storage.S3
	mc, err := minio.New(pl.S3Endpoint, &minio.Options{Creds: credentials.NewStaticV4(install.S3AccessKey, install.S3SecretKey, "")})
	if err != nil {
		return err
	}
	obj, err := mc.GetObject(ctx, st.Bucket, art.Path, minio.GetObjectOptions{})
	if err != nil {
		return err
	}
	h := sha256.New()
	n, err := io.Copy(h, obj)
	obj.Close()
	if err != nil {
		return fmt.Errorf("reading s3://%s/%s: %w", st.Bucket, art.Path, err)
	}
	stored := "sha256:" + hex.EncodeToString(h.Sum(nil))
	verdict := func(ok bool) string {
		if ok {
			return "matches"
		}
		return "DIFFERS"
	}
	fmt.Printf("\n%s (127.0.0.1:%d): artifact restored by restorejob/%s (backupjob/%s's newest):\n", srv.label, srv.port, rj.Name, bj.Name)
	fmt.Printf("  object    s3://%s/%s on %s\n", st.Bucket, art.Path, pl.S3Endpoint)
	fmt.Printf("  size      %d bytes reported, %d bytes stored (%s)\n", art.Size, n, verdict(art.Size == n))
	fmt.Printf("  checksum  %s reported\n            %s of the stored bytes (%s)\n", art.Checksum, stored, verdict(art.Checksum == stored))

	srcDB := bj.Spec.Database.Database
	dstDB := rj.Spec.Target.Database
	src, err := srv.tables(srcDB)
	if err != nil {
		return err
	}
	dst, err := srv.tables(dstDB)
	if err != nil {
		return err
	}
	byName := map[string]dbcheck.Table{}
	for _, t := range dst {
		byName[t.Name] = t
	}
	fmt.Printf("\n  %-12s %-44s %-44s %s\n", "TABLE", "SOURCE "+srcDB+" (rows, md5 of rows)", "RESTORED "+dstDB, "")
	equal := true
	for _, t := range src {
		r, ok := byName[t.Name]
		same := ok && r == t
		equal = equal && same
		mark := "equal"
		if !same {
			mark = "DIFFERENT"
		}
		fmt.Printf("  %-12s %-44s %-44s %s\n", t.Name, strconv.FormatInt(t.Rows, 10)+"  "+t.Checksum, strconv.FormatInt(r.Rows, 10)+"  "+r.Checksum, mark)
	}
	if len(dst) != len(src) {
		equal = false
	}
	if !equal || art.Size != n || art.Checksum != stored {
		return fmt.Errorf("%s: the restored database or the stored artifact does not match (see above)", srv.label)
	}
	return nil
}

// watchPlan waits until the sample ProtectionPlan has verified its first
// backup (a restore into its scratch database, the checks run there, the
// scratch database dropped) and prints what it reports.
func watchPlan(ctx context.Context, c client.Client, s *samples, timeout time.Duration) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	key := client.ObjectKey{Namespace: s.plan.GetNamespace(), Name: s.plan.GetName()}
	p := &platformv1.ProtectionPlan{}
	for {
		if err := c.Get(ctx, key, p); err != nil {
			return err
		}
		if lv := p.Status.LastVerification; lv != nil &&
			(lv.Result == platformv1.VerificationSucceeded || lv.Result == platformv1.VerificationFailed) {
			break
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("waiting for protectionplan/%s's first verification: %w", key.Name, ctx.Err())
		case <-time.After(time.Second):
		}
	}
	lv := p.Status.LastVerification
	fmt.Printf("\nprotectionplan/%s: phase %s; verification %s (restorejob/%s) of %s\n", p.Name, p.Status.Phase, lv.Result, lv.RestoreJob, lv.Artifact.Path)
	for _, t := range []string{platformv1.BackupHealthyCondition, platformv1.RecoverabilityVerifiedCondition, platformv1.ObjectivesMetCondition, "Ready"} {
		if cond := conditions.Get(p, t); cond != nil {
			fmt.Printf("  %-24s %-8s %s\n", t, cond.Status, cond.Reason)
		}
	}
	if d, rp := p.Status.RestoreDuration, p.Status.RecoveryPoint; d != nil && rp != nil {
		fmt.Printf("  restore duration (measured RTO) %s; recovery point (newest verified backup) %s\n", d.Duration, rp.Local().Format("15:04:05"))
	}
	for _, ck := range lv.Checks {
		fmt.Printf("  check %-12s passed=%v value=%q %s\n", ck.Name, ck.Passed, ck.Value, ck.Message)
	}
	rj := &restorev1.RestoreJob{}
	if err := c.Get(ctx, client.ObjectKey{Namespace: p.Namespace, Name: lv.RestoreJob}, rj); err == nil {
		fmt.Printf("  scratch database %s: created %v, dropped after the checks %v\n", rj.Spec.Target.Database, rj.Status.TargetCreated, rj.Status.TargetDropped)
	}
	if lv.Result != platformv1.VerificationSucceeded {
		return fmt.Errorf("the ProtectionPlan's verification failed: %s (see orchestrator.log and restore.log)", lv.Message)
	}
	return nil
}
