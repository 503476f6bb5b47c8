package suite

import (
	"bytes"
	"strings"
	"testing"

	"cairn.dev/agent/contract"
	"cairn.dev/agent/internal/catalog"
	"cairn.dev/agent/internal/naming"
)

// MigrateViaStore exports to a store, imports, and verifies against the
// inventory the export recorded; a corrupted artifact is refused before the
// target is touched, and a target changed after import is caught.
func MigrateViaStore(t *testing.T, e *Env, kind, changeRow string) {
	st := e.NewStore(t, kind)
	m := newMigration(t, e, "mig_store_"+kind)
	m.env = append(m.env, st.Env...)
	// The target side runs without the source's coordinates (another
	// cluster): only CAIRN_DB_NAME for MySQL's pattern schema.
	targetOnly := []string{"CAIRN_DB_HOST=", "CAIRN_DB_USER=", "CAIRN_DB_PASSWORD="}
	ps := m.ok(t, "precheck-source")
	if ps.Tables != seedTables(e) || ps.SourceVersion == "" || ps.TargetVersion != "" || len(ps.Problems) != 0 {
		t.Errorf("precheck-source: %+v", ps)
	}
	pt := m.ok(t, "precheck-target", targetOnly...)
	if pt.TargetVersion == "" || pt.SourceVersion != "" || len(pt.Problems) != 0 {
		t.Errorf("precheck-target of a missing database: %+v", pt)
	}
	ex := m.ok(t, "export")
	if ex.Artifact == "" || ex.Size <= 0 || !strings.HasPrefix(ex.Checksum, "sha256:") || ex.Tables != seedTables(e) {
		t.Fatalf("export: %+v", ex)
	}
	job := naming.MigrationJob("shop", "mig-store-"+kind)
	key := st.KeyOf(t, job, ex.Artifact)
	exportOutOfBackupJobsReach(t, e, st, m.src, naming.Job{Namespace: "shop", Name: "mig-store-" + kind}, ex.Artifact, key)
	name := key[strings.LastIndex(key, "/")+1:]
	entry, err := catalog.DecodeManifest(st.Read(t, job.ManifestKey(name)), job, job.ManifestKey(name))
	check(t, err)
	if entry.Inventory == nil || len(entry.Inventory.Tables) != seedTables(e) || entry.Inventory.Method != "Checksum" {
		t.Fatalf("manifest inventory: %+v", entry.Inventory)
	}
	if !entry.Inventory.Consistent {
		// PostgreSQL: the dump's exported snapshot; MySQL: the brief
		// global read lock (the test user has RELOAD).
		t.Errorf("export inventory not taken in the dump's snapshot")
	}

	targetOnly = append(targetOnly, "CAIRN_ARTIFACT="+ex.Artifact)
	im := m.ok(t, "import", targetOnly...)
	if im.TablesDone != seedTables(e) {
		t.Errorf("import: %+v", im)
	}
	if src, dst := fingerprint(t, e.DB, m.src), fingerprint(t, e.DB, m.dst); src != dst {
		t.Fatalf("imported target differs from source")
	}
	allMatch(t, m.verified(t, targetOnly...), seedTables(e))
	if pt := m.ok(t, "precheck-target", targetOnly...); len(pt.Problems) != seedTables(e) {
		t.Errorf("precheck-target of the imported target: %q", pt.Problems)
	}
	_, err = e.DB.SQL(m.dst, changeRow)
	check(t, err)
	if v := m.verified(t, targetOnly...); v.Mismatched != 1 || v.Items[0].Reason != "content differs" {
		t.Errorf("store verify after a changed row: %+v", v)
	}

	// Corrupt the artifact: import refuses it (exit 3) and leaves the
	// target as it is.
	before := fingerprint(t, e.DB, m.dst)
	data := st.Read(t, key)
	data[len(data)/2] ^= 0xff
	st.Write(t, key, data)
	r := m.run(t, "import", targetOnly...)
	mustExit(t, r, contract.ExitCorrupted)
	if !strings.Contains(r.TermLog, "corrupted") {
		t.Errorf("import of a corrupted artifact: %s", r.TermLog)
	}
	if after := fingerprint(t, e.DB, m.dst); after != before {
		t.Errorf("a refused import changed the target")
	}
}

// exportOutOfBackupJobsReach: a BackupJob named like the MigrationJob (same
// namespace and name, same store) does not see the migration's export: its
// list, restore, prune and delete neither show nor touch it, and its own
// backups land beside it, not among the migration's exports.
func exportOutOfBackupJobsReach(t *testing.T, e *Env, st *Store, db string, bj naming.Job, artifact, key string) {
	t.Helper()
	want := st.Read(t, key)
	if r := e.agent(t, st, db, bj, nil, "list"); r.Code != 0 || strings.TrimSpace(r.Stdout) != "" {
		t.Fatalf("BackupJob %s lists the migration's export: exit %d %q", bj, r.Code, r.Stdout)
	}
	if r := e.agent(t, st, db, bj, []string{"CAIRN_ARTIFACT=" + artifact}, "restore"); r.Code == 0 {
		t.Fatalf("BackupJob %s restored the migration's export %s", bj, artifact)
	}
	if r := e.agent(t, st, db, bj, []string{"CAIRN_RETENTION_DAYS=1"}, "prune"); r.Code != 0 {
		t.Fatalf("prune of BackupJob %s: exit %d %s", bj, r.Code, r.Stderr)
	}
	if r := e.agent(t, st, db, bj, nil, "delete"); r.Code != 0 {
		t.Fatalf("delete of BackupJob %s: exit %d %s", bj, r.Code, r.Stderr)
	}
	if got := st.Read(t, key); !bytes.Equal(got, want) {
		t.Fatalf("the export changed after BackupJob %s's prune and delete", bj)
	}
	if keys := st.Keys(t, bj); len(keys) != 0 {
		t.Fatalf("BackupJob %s's directory holds %v", bj, keys)
	}
}
