package main

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"strconv"
	"time"

	"github.com/minio/minio-go/v7"
	"github.com/minio/minio-go/v7/pkg/credentials"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"

	backupv1 "cairn.dev/apis/backup/v1"
	platformv1 "cairn.dev/apis/platform/v1"
	restorev1 "cairn.dev/apis/restore/v1"
	"cairn.dev/e2e/dbcheck"
	"cairn.dev/e2e/platform"
	"cairn.dev/libs/conditions"
)

// demoOrders is how many orders the sample database gets (a tenth as many
// customers, two items per order).
const demoOrders = 20000

// seed creates the sample BackupJob's database with real rows.
func seed(pl *planeState, s *samples) error {
	db, _, _ := unstructured.NestedString(s.backup.Object, "spec", "database", "database")
	if err := dbcheck.SeedPostgres(pl.Postgres, db, demoOrders); err != nil {
		return fmt.Errorf("creating the sample database %s: %w", db, err)
	}
	tables, err := dbcheck.PostgresTables(pl.Postgres, db)
	if err != nil {
		return err
	}
	var rows int64
	for _, t := range tables {
		rows += t.Rows
	}
	logf("created database %s on the local PostgreSQL: %d tables, %d rows", db, len(tables), rows)
	return nil
}

// mapSamples points the samples at the local servers, as a user points them
// at theirs — database host and port, S3 endpoint, the Secrets' values — and
// prints the mapping.
func mapSamples(s *samples, pl *planeState) error {
	host, _, _ := unstructured.NestedString(s.backup.Object, "spec", "database", "host")
	port, _, _ := unstructured.NestedFieldNoCopy(s.backup.Object, "spec", "database", "port")
	endpoint, _, _ := unstructured.NestedString(s.backup.Object, "spec", "storage", "s3", "endpoint")
	bucket, _, _ := unstructured.NestedString(s.backup.Object, "spec", "storage", "s3", "bucket")
	if bucket != platform.Bucket {
		return fmt.Errorf("the sample BackupJob's bucket %q is not the demo's %q", bucket, platform.Bucket)
	}
	set := func(o *unstructured.Unstructured, v any, path ...string) error {
		return unstructured.SetNestedField(o.Object, v, path...)
	}
	for _, err := range []error{
		set(s.backup, "127.0.0.1", "spec", "database", "host"),
		set(s.backup, int64(pl.Postgres.Port), "spec", "database", "port"),
		set(s.backup, pl.S3Endpoint, "spec", "storage", "s3", "endpoint"),
		set(s.backup, true, "spec", "storage", "s3", "insecure"),
		set(s.restore, "127.0.0.1", "spec", "target", "host"),
		set(s.restore, int64(pl.Postgres.Port), "spec", "target", "port"),
		set(s.plan, "127.0.0.1", "spec", "database", "host"),
		set(s.plan, int64(pl.Postgres.Port), "spec", "database", "port"),
		set(s.plan, pl.S3Endpoint, "spec", "backup", "storage", "s3", "endpoint"),
		set(s.plan, true, "spec", "backup", "storage", "s3", "insecure"),
		set(s.plan, "127.0.0.1", "spec", "verification", "restoreInto", "host"),
		set(s.plan, int64(pl.Postgres.Port), "spec", "verification", "restoreInto", "port"),
	} {
		if err != nil {
			return err
		}
	}
	// The plan's migration (start: false, so nothing is created) must name
	// the plan's database as its source: admission refuses any other.
	if _, ok, _ := unstructured.NestedMap(s.plan.Object, "spec", "migration", "template", "source"); ok {
		if err := set(s.plan, "127.0.0.1", "spec", "migration", "template", "source", "host"); err != nil {
			return err
		}
		if err := set(s.plan, int64(pl.Postgres.Port), "spec", "migration", "template", "source", "port"); err != nil {
			return err
		}
	}
	for _, sec := range s.secrets {
		switch sec.GetName() {
		case "orders-db-credentials":
			if err := set(sec, map[string]any{"username": pl.Postgres.User, "password": pl.Postgres.Password}, "stringData"); err != nil {
				return err
			}
		case "orders-db-s3-credentials":
			if err := set(sec, map[string]any{"accessKeyID": platform.S3AccessKey, "secretAccessKey": platform.S3SecretKey}, "stringData"); err != nil {
				return err
			}
		}
	}
	logf("samples mapped to the local servers:")
	logf("  %s:%v (BackupJob and ProtectionPlan database, RestoreJob target, the plan's scratch database and migration source) -> 127.0.0.1:%d (PostgreSQL 15)", host, port, pl.Postgres.Port)
	logf("  %s (https) -> http://%s (versitygw), bucket %s", endpoint, pl.S3Endpoint, bucket)
	logf("  Secret orders-db-credentials -> user %s of that server; Secret orders-db-s3-credentials -> the S3 server's key", pl.Postgres.User)
	return nil
}

// report prints what the first backup stored and what the restore made of
// it: the artifact as the BackupJob reports it and as the store holds it,
// and each table of the source and the restored database side by side.
func report(ctx context.Context, c client.Client, pl *planeState, s *samples) error {
	bj := &backupv1.BackupJob{}
	if err := c.Get(ctx, client.ObjectKey{Namespace: s.backup.GetNamespace(), Name: s.backup.GetName()}, bj); err != nil {
		return err
	}
	rj := &restorev1.RestoreJob{}
	if err := c.Get(ctx, client.ObjectKey{Namespace: s.restore.GetNamespace(), Name: s.restore.GetName()}, rj); err != nil {
		return err
	}
	art := rj.Status.Artifact
	if art == nil {
		return fmt.Errorf("restorejob/%s has no artifact in its status", rj.Name)
	}
	st := bj.Spec.Storage.S3
	mc, err := minio.New(pl.S3Endpoint, &minio.Options{Creds: credentials.NewStaticV4(platform.S3AccessKey, platform.S3SecretKey, "")})
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
	fmt.Printf("\nArtifact restored by restorejob/%s (backupjob/%s's newest):\n", rj.Name, bj.Name)
	fmt.Printf("  object    s3://%s/%s on %s\n", st.Bucket, art.Path, pl.S3Endpoint)
	fmt.Printf("  size      %d bytes reported, %d bytes stored (%s)\n", art.Size, n, verdict(art.Size == n))
	fmt.Printf("  checksum  %s reported\n            %s of the stored bytes (%s)\n", art.Checksum, stored, verdict(art.Checksum == stored))

	srcDB := bj.Spec.Database.Database
	dstDB := rj.Spec.Target.Database
	src, err := dbcheck.PostgresTables(pl.Postgres, srcDB)
	if err != nil {
		return err
	}
	dst, err := dbcheck.PostgresTables(pl.Postgres, dstDB)
	if err != nil {
		return err
	}
	byName := map[string]dbcheck.Table{}
	for _, t := range dst {
		byName[t.Name] = t
	}
	fmt.Printf("\n%-12s %-44s %-44s %s\n", "TABLE", "SOURCE "+srcDB+" (rows, md5 of rows)", "RESTORED "+dstDB, "")
	equal := true
	for _, t := range src {
		r, ok := byName[t.Name]
		same := ok && r == t
		equal = equal && same
		mark := "equal"
		if !same {
			mark = "DIFFERENT"
		}
		fmt.Printf("%-12s %-44s %-44s %s\n", t.Name, strconv.FormatInt(t.Rows, 10)+"  "+t.Checksum, strconv.FormatInt(r.Rows, 10)+"  "+r.Checksum, mark)
	}
	if len(dst) != len(src) {
		equal = false
	}
	if !equal || art.Size != n || art.Checksum != stored {
		return fmt.Errorf("the restored database or the stored artifact does not match (see above)")
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
