// Package postgres_test runs the agent's data-path suite against a private
// PostgreSQL 15 server and a versitygw S3 server, both started here.
package postgres_test

import (
	"fmt"
	"os"
	"testing"

	"cairn.dev/agent/test/suite"
)

var (
	env      *suite.Env
	setupErr error
)

func TestMain(m *testing.M) {
	var cleanup func()
	env, cleanup, setupErr = suite.Setup(startPG)
	if setupErr != nil {
		fmt.Fprintf(os.Stderr, "set-up failed: %v\n", setupErr)
	}
	code := m.Run()
	cleanup()
	os.Exit(code)
}

func e(t *testing.T) *suite.Env { return suite.Require(t, env, setupErr) }

func TestVersion(t *testing.T) { suite.Version(t, e(t)) }

func TestRoundTrip(t *testing.T) {
	for _, kind := range suite.Stores {
		t.Run(kind, func(t *testing.T) { suite.RoundTrip(t, e(t), kind) })
	}
}

func TestCorruptedArtifactRefused(t *testing.T) {
	for _, kind := range suite.Stores {
		t.Run(kind, func(t *testing.T) { suite.CorruptedRefused(t, e(t), kind) })
	}
}

func TestStoreUnreachable(t *testing.T) {
	t.Run("pvc", func(t *testing.T) { suite.StoreUnreachablePVC(t, e(t)) })
	t.Run("s3", func(t *testing.T) { suite.StoreUnreachableS3(t, e(t)) })
}

func TestKilledMidStream(t *testing.T) {
	for _, kind := range suite.Stores {
		t.Run(kind, func(t *testing.T) { suite.KilledMidStream(t, e(t), kind) })
	}
}

func TestPruneKeepsNewest(t *testing.T) {
	for _, kind := range suite.Stores {
		t.Run(kind, func(t *testing.T) { suite.PruneKeepsNewest(t, e(t), kind) })
	}
}

func TestWrongPassword(t *testing.T) {
	for _, kind := range suite.Stores {
		t.Run(kind, func(t *testing.T) { suite.WrongPassword(t, e(t), kind, "password authentication failed") })
	}
}

func TestDeleteJob(t *testing.T) {
	for _, kind := range suite.Stores {
		t.Run(kind, func(t *testing.T) { suite.DeleteJob(t, e(t), kind) })
	}
}

func TestWrongS3Credentials(t *testing.T) { suite.WrongS3Credentials(t, e(t)) }

func TestConcurrentWriters(t *testing.T) {
	for _, kind := range suite.Stores {
		t.Run(kind, func(t *testing.T) { suite.ConcurrentWriters(t, e(t), kind) })
	}
}

func TestConcurrentDelete(t *testing.T) {
	for _, kind := range suite.Stores {
		t.Run(kind, func(t *testing.T) { suite.ConcurrentDelete(t, e(t), kind) })
	}
}

func TestHostileDatabaseNames(t *testing.T) {
	for _, kind := range suite.Stores {
		t.Run(kind, func(t *testing.T) { suite.HostileDatabaseNames(t, e(t), kind) })
	}
}

func TestHostileHosts(t *testing.T) { suite.HostileHosts(t, e(t), "pvc") }

func TestRestoreStreamFailsCommitsNothing(t *testing.T) { suite.RestoreStreamFails(t, e(t)) }

func TestChecksAndScratchDrop(t *testing.T) {
	for _, kind := range suite.Stores {
		t.Run(kind, func(t *testing.T) { suite.Checks(t, e(t), kind) })
	}
}

func TestScratchDroppedWhenInterrupted(t *testing.T) {
	suite.ScratchDroppedWhenInterrupted(t, e(t), "pvc")
}

// TestHostileChecks: checks that write, run a shell or a program, write a
// server file, outlive the transaction or run forever all fail, with no
// effect, and every check is reported.
func TestHostileChecks(t *testing.T)   { suite.HostileChecks(t, e(t), "s3") }
func TestBackupInventory(t *testing.T) { suite.BackupInventory(t, e(t)) }

func TestMigrateDirect(t *testing.T) { suite.MigrateDirect(t, e(t)) }

func TestMigrateVerifyCatches(t *testing.T) {
	suite.MigrateVerifyCatches(t, e(t), []suite.Catch{
		{SQL: "UPDATE customers SET name = 'changed' WHERE id = 7", Table: "public.customers", Reason: "content differs"},
		{SQL: "INSERT INTO orders (customer_id, total) VALUES (1, 5)", Table: "public.orders", Reason: "rows differ"},
		{SQL: "DROP VIEW big_spenders; DROP TABLE orders", Table: "public.orders", Reason: "missing on target"},
		{SQL: "CREATE TABLE extra (id int)", Table: "public.extra", Reason: "only on target", Undo: "DROP TABLE extra"},
	})
}

func TestMigrateIncludeExclude(t *testing.T) {
	t.Run("table", func(t *testing.T) {
		suite.MigrateIncludeExclude(t, e(t), "public.cust*", "", []string{"public.customers"}, []string{"orders"})
	})
	t.Run("schema minus table", func(t *testing.T) {
		suite.MigrateIncludeExclude(t, e(t), "public", "*.orders", []string{"public.customers"}, []string{"orders"})
	})
}

func TestMigrateSchemaOnly(t *testing.T) { suite.MigrateSchemaOnly(t, e(t)) }

func TestMigrateKilledCopy(t *testing.T) { suite.MigrateKilledCopy(t, e(t)) }

func TestMigrateViaStore(t *testing.T) {
	for _, kind := range suite.Stores {
		t.Run(kind, func(t *testing.T) {
			suite.MigrateViaStore(t, e(t), kind, "UPDATE customers SET email = 'x' WHERE id = 3")
		})
	}
}

func TestMigrateCutover(t *testing.T) { suite.MigrateCutoverPostgres(t, e(t)) }

func TestMigrateUsage(t *testing.T) { suite.MigrateUsage(t, e(t)) }

func TestMigrateContinuous(t *testing.T) { suite.MigrateContinuous(t, e(t)) }

func TestMigrateLargeObjects(t *testing.T) { suite.MigrateLargeObjects(t, e(t)) }

func TestMigrateCutoverSourceChanged(t *testing.T) { suite.MigrateCutoverSourceChanged(t, e(t)) }

func TestMigrateCutoverReadOnlyHalfway(t *testing.T) { suite.MigrateCutoverReadOnlyHalfway(t, e(t)) }

func TestMigrateReplicationNeverLeaks(t *testing.T) { suite.MigrateReplicationNeverLeaks(t, e(t)) }

func TestMigrateContinuousUnderLoad100(t *testing.T) {
	suite.MigrateContinuousUnderLoad(t, e(t), 300000, 100)
}

func TestMigrateContinuousUnderLoad1000(t *testing.T) {
	suite.MigrateContinuousUnderLoad(t, e(t), 300000, 1000)
}

func TestMigrateContinuousDiffers(t *testing.T) { suite.MigrateContinuousDiffers(t, e(t)) }

func TestMigrateContinuousTruncateAndSequences(t *testing.T) {
	suite.MigrateContinuousTruncateAndSequences(t, e(t))
}

func TestEncryption(t *testing.T) {
	for _, kind := range suite.Stores {
		t.Run(kind, func(t *testing.T) { suite.Encryption(t, e(t), kind) })
	}
}

func TestRetentionTiers(t *testing.T) {
	for _, kind := range suite.Stores {
		t.Run(kind, func(t *testing.T) { suite.RetentionTiers(t, e(t), kind) })
	}
}

func TestObjectLock(t *testing.T)                { suite.ObjectLock(t, e(t)) }
func TestObjectLockExtendedByTiers(t *testing.T) { suite.ObjectLockExtendedByTiers(t, e(t)) }

func TestMigrateViaStoreEncrypted(t *testing.T) {
	for _, kind := range suite.Stores {
		t.Run(kind, func(t *testing.T) { suite.MigrateViaStoreEncrypted(t, e(t), kind) })
	}
}

func TestPointInTime(t *testing.T) {
	for _, kind := range suite.Stores {
		t.Run(kind, func(t *testing.T) { suite.PointInTime(t, e(t), kind) })
	}
}

// The encrypted archive on S3 here and on a PVC for MySQL (test/mysql):
// segment encryption sits above the store, and TestPointInTime runs both
// stores in clear (CI's time budget).
func TestPointInTimeEncrypted(t *testing.T) {
	t.Run("base", func(t *testing.T) { suite.PointInTimePostgresEncrypted(t, e(t), "pvc") })
	t.Run("s3", func(t *testing.T) { suite.PointInTimeEncrypted(t, e(t), "s3") })
}

func TestReleaseSlotWithoutStore(t *testing.T) { suite.ReleaseSlotWithoutStore(t, e(t)) }

func TestPartsRoundTrip(t *testing.T) {
	for _, kind := range suite.Stores {
		t.Run(kind, func(t *testing.T) { suite.PGPartsRoundTrip(t, e(t), kind) })
	}
}

func TestPartsFailures(t *testing.T) { suite.PGPartsFailures(t, e(t)) }

func TestPartsOtherEncoding(t *testing.T) { suite.PGPartsOtherEncoding(t, e(t)) }
