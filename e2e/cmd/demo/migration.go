package main

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	migrationv1 "cairn.dev/apis/migration/v1"
	"cairn.dev/e2e/dbcheck"
)

// demoMigrationTarget is the database the sample MigrationJob copies into:
// a second database on the local PostgreSQL (the server identity check
// allows another database of the same server; it refuses the same one).
const demoMigrationTarget = "orders_v16"

// lateOrderID is the order the demo writes to the source after the
// migration verified it and before it is approved: cutover copies it too.
const lateOrderID = 9000001

// mapMigration points the sample MigrationJob's source and target at the
// local PostgreSQL (the target into demoMigrationTarget) and the Secret it
// switches at the source, as the application would read it.
func mapMigration(s *samples, pl *planeState, mapDB func(o *unstructured.Unstructured, engine, what string, path ...string) error) error {
	mj := s.migration
	eng, _, _ := unstructured.NestedString(mj.Object, "spec", "source", "engine")
	teng, _, _ := unstructured.NestedString(mj.Object, "spec", "target", "engine")
	if eng != "postgres" || teng != "postgres" {
		return fmt.Errorf("the sample MigrationJob %s is not PostgreSQL to PostgreSQL", mj.GetName())
	}
	if err := unstructured.SetNestedField(mj.Object, demoMigrationTarget, "spec", "target", "database"); err != nil {
		return err
	}
	err := errors.Join(
		mapDB(mj, eng, "MigrationJob "+mj.GetName()+" source", "spec", "source"),
		mapDB(mj, teng, "MigrationJob "+mj.GetName()+" target (database "+demoMigrationTarget+")", "spec", "target"))
	if err != nil {
		return err
	}
	switchName, _, _ := unstructured.NestedString(mj.Object, "spec", "cutover", "switchSecret", "name")
	srcDB, _, _ := unstructured.NestedString(mj.Object, "spec", "source", "database")
	for _, sec := range s.secrets {
		if sec.GetName() == switchName {
			if err := unstructured.SetNestedField(sec.Object, map[string]any{
				"host": "127.0.0.1", "port": fmt.Sprint(pl.Postgres.Port), "database": srcDB,
			}, "stringData"); err != nil {
				return err
			}
			logf("  Secret %s (the application's connection, switched at cutover) -> 127.0.0.1:%d database %s", switchName, pl.Postgres.Port, srcDB)
		}
	}
	return nil
}

// runMigration follows the sample MigrationJob (applied with the other
// samples) to ReadyForCutover, prints its per-table verification, writes a
// row to the source after that verification, approves the cutover, waits
// for Succeeded, and shows the late row on the target and the switched
// Secret.
func runMigration(ctx context.Context, c client.Client, pl *planeState, s *samples, timeout time.Duration) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	key := client.ObjectKeyFromObject(s.migration)
	mj := &migrationv1.MigrationJob{}
	waitFor := func(want migrationv1.Phase) error {
		last := migrationv1.Phase("")
		for {
			if err := c.Get(ctx, key, mj); err != nil {
				return err
			}
			if mj.Status.Phase != last {
				last = mj.Status.Phase
				logf("migrationjob/%s: %s", key.Name, or(string(last), "-"))
			}
			if mj.Status.Phase == want {
				return nil
			}
			if mj.Status.Phase == migrationv1.PhaseFailed {
				printConditions(mj)
				return fmt.Errorf("migrationjob/%s failed (see migration.log)", key.Name)
			}
			select {
			case <-ctx.Done():
				printConditions(mj)
				return fmt.Errorf("waiting for migrationjob/%s to be %s: %w", key.Name, want, ctx.Err())
			case <-time.After(time.Second):
			}
		}
	}
	if err := waitFor(migrationv1.PhaseReadyForCutover); err != nil {
		return err
	}
	src, tgt := mj.Spec.Source, mj.Spec.Target.DatabaseRef
	fmt.Printf("\nmigrationjob/%s: %s:%d/%s -> %s:%d/%s, ready for cutover\n", mj.Name, src.Host, src.Port, src.Database, tgt.Host, tgt.Port, tgt.Database)
	printVerification(mj)

	// A row written after verification: it must reach the target.
	pg := pl.Postgres
	if _, err := pg.SQL(src.Database, fmt.Sprintf(
		"INSERT INTO orders VALUES (%d, 1, 42.00, 'late', now())", lateOrderID)); err != nil {
		return fmt.Errorf("writing the late order to the source: %w", err)
	}
	fmt.Printf("\n  wrote order %d to the source %s after verification (before approval)\n", lateOrderID, src.Database)

	patch := []byte(`{"spec":{"cutover":{"approved":true}}}`)
	if err := c.Patch(ctx, &migrationv1.MigrationJob{ObjectMeta: mj.ObjectMeta}, client.RawPatch(types.MergePatchType, patch)); err != nil {
		return fmt.Errorf("approving migrationjob/%s: %w", key.Name, err)
	}
	fmt.Printf("  approved: kubectl patch migrationjob %s --type merge -p '%s'\n", key.Name, patch)
	if err := waitFor(migrationv1.PhaseSucceeded); err != nil {
		return err
	}
	fmt.Printf("\nmigrationjob/%s: %s\n", mj.Name, mj.Status.Phase)
	printConditions(mj)
	if co := mj.Status.Cutover; co != nil {
		for _, a := range co.Actions {
			fmt.Printf("  cutover: %s\n", a)
		}
	}
	printVerification(mj)

	row, err := pg.SQL(tgt.Database, fmt.Sprintf("SELECT id, customer_id, amount, status FROM orders WHERE id = %d", lateOrderID))
	if err != nil {
		return err
	}
	row = strings.TrimSpace(row)
	fmt.Printf("\n  order %d on the target %s after cutover: %q\n", lateOrderID, tgt.Database, row)
	if row == "" {
		return fmt.Errorf("the order written after verification is not on the target %s", tgt.Database)
	}
	srcT, err := dbcheck.PostgresTables(pg, src.Database)
	if err != nil {
		return err
	}
	dstT, err := dbcheck.PostgresTables(pg, tgt.Database)
	if err != nil {
		return err
	}
	byName := map[string]dbcheck.Table{}
	for _, t := range dstT {
		byName[t.Name] = t
	}
	equal := true
	for _, t := range srcT {
		mark := "equal"
		if byName[t.Name] != t {
			mark, equal = "DIFFERENT", false
		}
		fmt.Printf("  %-12s source %6d rows %s  target %6d rows %s  %s\n", t.Name, t.Rows, t.Checksum, byName[t.Name].Rows, byName[t.Name].Checksum, mark)
	}
	if !equal {
		return errors.New("the migration target differs from the source after cutover (see above)")
	}

	if sw := mj.Spec.Cutover.SwitchSecret; sw != nil {
		sec := &corev1.Secret{}
		if err := c.Get(ctx, client.ObjectKey{Namespace: mj.Namespace, Name: sw.Name}, sec); err != nil {
			return err
		}
		fmt.Printf("  Secret %s now: host %s port %s database %s\n", sw.Name, sec.Data["host"], sec.Data["port"], sec.Data["database"])
		if string(sec.Data["database"]) != tgt.Database {
			return fmt.Errorf("Secret %s was not switched to the target database %s", sw.Name, tgt.Database)
		}
	}
	return nil
}

func printVerification(mj *migrationv1.MigrationJob) {
	v := mj.Status.Verification
	if v == nil {
		fmt.Printf("  (no verification in status)\n")
		return
	}
	fmt.Printf("  verification: %s\n", v.Summary)
	for _, it := range v.Items {
		mark := "match"
		if !it.Match {
			mark = "DIFFERS: " + it.Reason
		}
		fmt.Printf("    %-24s source %6d rows  target %6d rows  %s\n", it.Table, it.SourceRows, it.TargetRows, mark)
	}
}

func printConditions(mj *migrationv1.MigrationJob) {
	for _, c := range mj.Status.Conditions {
		fmt.Printf("  %-16s %-6s %-22s %s\n", c.Type, c.Status, c.Reason, c.Message)
	}
}

func or(s, d string) string {
	if s == "" {
		return d
	}
	return s
}
