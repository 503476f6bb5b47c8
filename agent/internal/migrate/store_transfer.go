package migrate

import (
	"context"
	"errors"
	"fmt"
	"time"

	"cairn.dev/agent/contract"
	"cairn.dev/agent/internal/backup"
	"cairn.dev/agent/internal/catalog"
	"cairn.dev/agent/internal/config"
	"cairn.dev/agent/internal/engine"
	"cairn.dev/agent/internal/inventory"
	"cairn.dev/agent/internal/naming"
	"cairn.dev/agent/internal/pipeline"
	"cairn.dev/agent/internal/store"
)

// requireStore checks that a store transfer is configured.
func (mig *Migration) requireStore() (store.Store, error) {
	if mig.cfg.Store == "" {
		return nil, &config.UsageError{Msg: "migrate " + mig.cfg.Migrate.Step + " needs a store: CAIRN_STORE (pvc or s3) and its settings"}
	}
	if mig.cfg.Migrate.Migration.Name == "" {
		return nil, &config.UsageError{Msg: "migrate " + mig.cfg.Migrate.Step + " needs CAIRN_MIGRATION (namespace/name): it names the store artifacts"}
	}
	return mig.backup.OpenStore()
}

// migrationArtifact finds CAIRN_ARTIFACT in the migration's folder.
func (mig *Migration) migrationArtifact(ctx context.Context) (catalog.Entry, store.Store, error) {
	st, err := mig.requireStore()
	if err != nil {
		return catalog.Entry{}, nil, err
	}
	if mig.cfg.Artifact == "" {
		return catalog.Entry{}, nil, &config.UsageError{Msg: "CAIRN_ARTIFACT is not set: the artifact export reported"}
	}
	if err := st.Check(ctx); err != nil {
		return catalog.Entry{}, nil, err
	}
	cat, _, err := mig.backup.LoadIndex(ctx, st)
	if err != nil {
		return catalog.Entry{}, nil, err
	}
	e, ok := cat.Find(mig.cfg.Artifact)
	if !ok {
		return catalog.Entry{}, nil, fmt.Errorf("artifact %q is not among the exports of migration %s in %s", mig.cfg.Artifact, mig.cfg.BackupJob, st)
	}
	if e.Engine != mig.cfg.Engine {
		return catalog.Entry{}, nil, &config.UsageError{Msg: fmt.Sprintf("artifact %s is a %s export, but the engine is %s", e.Name, e.Engine, mig.cfg.Engine)}
	}
	return e, st, nil
}

// exportStep dumps the included objects of the source into the store
// (the backup's artifact format, under the migration's key) and records the
// source's inventory, taken in the dump's own snapshot, in the manifest.
// A retried export writes a new artifact; the failed run's partial upload
// is never listed.
func (mig *Migration) exportStep(ctx context.Context, res *contract.MigrationResult) error {
	cfg := mig.cfg
	m := cfg.Migrate
	st, err := mig.requireStore()
	if err != nil {
		return err
	}
	sc, err := mig.source()
	if err != nil {
		return err
	}
	if err := st.Check(ctx); err != nil {
		return err
	}
	eng, tables, err := mig.selectedSourceEngine(ctx, sc)
	if err != nil {
		return err
	}
	job := cfg.BackupJob
	start := mig.now().Truncate(time.Millisecond)
	name, err := naming.ArtifactNameToken(job, eng.Name(), start, naming.NewToken())
	if err != nil {
		return err
	}
	if mig.cfg.Recipients != nil {
		name += naming.ExtEncrypted
	}
	key := job.Key(name)
	stopMarker, err := mig.backup.StartMarker(ctx, st, name, start)
	if err != nil {
		return err
	}
	defer func() {
		if stopMarker != nil {
			stopMarker()
		}
	}()
	method := m.Verify
	if method == "None" {
		method = inventory.MethodList
	}
	if m.Mode == "SchemaOnly" {
		method = inventory.MethodList
	}
	o := mig.invOptions(method)
	o.Parallel = 1
	w, inv, invErr, err := mig.backup.DumpWithInventory(ctx, eng, sc, st, key, o)
	if err != nil {
		return err
	}
	if invErr != nil {
		_ = st.Delete(context.WithoutCancel(ctx), key)
		return invErr
	}
	end := mig.now().Truncate(time.Millisecond)
	entry := catalog.Entry{Name: name, Size: w.Size, Checksum: w.Checksum, Start: start, End: end,
		DurationSeconds: backup.Seconds(end.Sub(start)), Engine: eng.Name(), Format: eng.Format(), Compression: "zstd",
		AgentVersion: mig.version, Inventory: inv, Source: mig.backup.RecordIdentity(ctx, mig.cfg.Engine, sc)}
	if mig.cfg.Recipients != nil {
		entry.Encryption = mig.cfg.Recipients.Record()
	}
	if err := mig.backup.WriteManifest(ctx, st, entry); err != nil {
		return fmt.Errorf("artifact %s was written but is not listed: %w", st.Path(key), err)
	}
	stopMarker()
	stopMarker = nil
	r := backup.EntryResult(st, key, entry)
	res.Artifact, res.Size, res.Checksum = r.Artifact, r.Size, r.Checksum
	res.Tables, res.TablesDone, res.Bytes = len(tables), len(tables), w.Size
	mig.log.Info("exported", "artifact", r.Artifact, "size", w.Size, "tables", len(tables))
	return nil
}

// importStep restores an exported artifact into the target: checksum
// verified before the target is touched (exit 3 when corrupted), then the
// engine's restore (PostgreSQL: one transaction, objects of the dump
// replaced; MySQL: each table dropped and recreated). A retried import
// restores the whole artifact again.
func (mig *Migration) importStep(ctx context.Context, res *contract.MigrationResult) error {
	entry, st, err := mig.migrationArtifact(ctx)
	if err != nil {
		return err
	}
	tc, err := mig.target()
	if err != nil {
		return err
	}
	eng, err := engine.New(mig.cfg.Engine, tc)
	if err != nil {
		return &config.UsageError{Msg: "target: " + err.Error()}
	}
	key := mig.cfg.BackupJob.Key(entry.Name)
	ids, err := mig.backup.IdentitiesFor(st.Path(key), entry)
	if err != nil {
		return err
	}
	if err := mig.backup.Verify(ctx, st, key, entry, ids); err != nil {
		if errors.Is(err, pipeline.ErrCorrupted) {
			return fmt.Errorf("refusing to import: %w; the target database was not touched", err)
		}
		return fmt.Errorf("cannot verify %s, the target database was not touched: %w", st.Path(key), err)
	}
	if err := mig.backup.RefuseRecordedSource(ctx, "import", mig.cfg.Engine, entry, tc, false); err != nil {
		return err
	}
	if err := eng.Prepare(ctx); err != nil {
		return fmt.Errorf("prepare target database %q: %w", tc.Database, err)
	}
	if mig.cfg.Engine == "postgres" && entry.Inventory != nil {
		// A dump of selected tables has no CREATE SCHEMA.
		if err := pgCreateSchemas(ctx, tc, entry.Inventory.Tables); err != nil {
			return err
		}
	}
	if err := pipeline.Restore(ctx, st, key, entry.Size, entry.Checksum, ids, eng); err != nil {
		return err
	}
	res.Artifact, res.Size, res.Checksum = st.Path(key), entry.Size, entry.Checksum
	res.Bytes = entry.Size
	if entry.Inventory != nil {
		res.Tables, res.TablesDone = len(entry.Inventory.Tables), len(entry.Inventory.Tables)
	}
	return nil
}
