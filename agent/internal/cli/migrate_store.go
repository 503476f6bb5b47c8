package cli

import (
	"context"
	"errors"
	"fmt"
	"time"

	"cairn.dev/agent/contract"
	"cairn.dev/agent/internal/catalog"
	"cairn.dev/agent/internal/config"
	"cairn.dev/agent/internal/engine"
	"cairn.dev/agent/internal/inventory"
	"cairn.dev/agent/internal/naming"
	"cairn.dev/agent/internal/pipeline"
	"cairn.dev/agent/internal/store"
)

// requireStore checks that a store transfer is configured.
func (a *app) requireStore() (store.Store, error) {
	if a.cfg.Store == "" {
		return nil, &config.UsageError{Msg: "migrate " + a.cfg.Migrate.Step + " needs a store: CAIRN_STORE (pvc or s3) and its settings"}
	}
	if a.cfg.Migrate.Migration.Name == "" {
		return nil, &config.UsageError{Msg: "migrate " + a.cfg.Migrate.Step + " needs CAIRN_MIGRATION (namespace/name): it names the store artifacts"}
	}
	return a.openStore()
}

// migrationArtifact finds CAIRN_ARTIFACT in the migration's folder.
func (a *app) migrationArtifact(ctx context.Context) (catalog.Entry, store.Store, error) {
	st, err := a.requireStore()
	if err != nil {
		return catalog.Entry{}, nil, err
	}
	if a.cfg.Artifact == "" {
		return catalog.Entry{}, nil, &config.UsageError{Msg: "CAIRN_ARTIFACT is not set: the artifact export reported"}
	}
	if err := st.Check(ctx); err != nil {
		return catalog.Entry{}, nil, err
	}
	cat, _, err := a.loadIndex(ctx, st)
	if err != nil {
		return catalog.Entry{}, nil, err
	}
	e, ok := cat.Find(a.cfg.Artifact)
	if !ok {
		return catalog.Entry{}, nil, fmt.Errorf("artifact %q is not among the exports of migration %s in %s", a.cfg.Artifact, a.cfg.BackupJob, st)
	}
	if e.Engine != a.cfg.Engine {
		return catalog.Entry{}, nil, &config.UsageError{Msg: fmt.Sprintf("artifact %s is a %s export, but the engine is %s", e.Name, e.Engine, a.cfg.Engine)}
	}
	return e, st, nil
}

// exportStep dumps the included objects of the source into the store
// (the backup's artifact format, under the migration's key) and records the
// source's inventory, taken in the dump's own snapshot, in the manifest.
// A retried export writes a new artifact; the failed run's partial upload
// is never listed.
func (a *app) exportStep(ctx context.Context, res *contract.MigrationResult) error {
	cfg := a.cfg
	m := cfg.Migrate
	st, err := a.requireStore()
	if err != nil {
		return err
	}
	sc, err := a.source()
	if err != nil {
		return err
	}
	if err := st.Check(ctx); err != nil {
		return err
	}
	eng, tables, err := a.selectedSourceEngine(ctx, sc)
	if err != nil {
		return err
	}
	job := cfg.BackupJob
	start := a.now().Truncate(time.Millisecond)
	name, err := naming.ArtifactNameToken(job, eng.Name(), start, naming.NewToken())
	if err != nil {
		return err
	}
	if a.cfg.Recipients != nil {
		name += naming.ExtEncrypted
	}
	key := job.Key(name)
	stopMarker, err := a.startMarker(ctx, st, name, start)
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
	o := a.invOptions(method)
	o.Parallel = 1
	w, inv, invErr, err := a.dumpWithInventory(ctx, eng, sc, st, key, o)
	if err != nil {
		return err
	}
	if invErr != nil {
		_ = st.Delete(context.WithoutCancel(ctx), key)
		return invErr
	}
	end := a.now().Truncate(time.Millisecond)
	entry := catalog.Entry{Name: name, Size: w.Size, Checksum: w.Checksum, Start: start, End: end,
		DurationSeconds: seconds(end.Sub(start)), Engine: eng.Name(), Format: eng.Format(), Compression: "zstd",
		AgentVersion: a.version, Inventory: inv, Source: a.recordIdentity(ctx, a.cfg.Engine, sc)}
	if a.cfg.Recipients != nil {
		entry.Encryption = a.cfg.Recipients.Record()
	}
	if err := a.writeManifest(ctx, st, entry); err != nil {
		return fmt.Errorf("artifact %s was written but is not listed: %w", st.Path(key), err)
	}
	stopMarker()
	stopMarker = nil
	r := entryResult(st, key, entry)
	res.Artifact, res.Size, res.Checksum = r.Artifact, r.Size, r.Checksum
	res.Tables, res.TablesDone, res.Bytes = len(tables), len(tables), w.Size
	a.log.Info("exported", "artifact", r.Artifact, "size", w.Size, "tables", len(tables))
	return nil
}

// importStep restores an exported artifact into the target: checksum
// verified before the target is touched (exit 3 when corrupted), then the
// engine's restore (PostgreSQL: one transaction, objects of the dump
// replaced; MySQL: each table dropped and recreated). A retried import
// restores the whole artifact again.
func (a *app) importStep(ctx context.Context, res *contract.MigrationResult) error {
	entry, st, err := a.migrationArtifact(ctx)
	if err != nil {
		return err
	}
	tc, err := a.target()
	if err != nil {
		return err
	}
	eng, err := engine.New(a.cfg.Engine, tc)
	if err != nil {
		return &config.UsageError{Msg: "target: " + err.Error()}
	}
	key := a.cfg.BackupJob.Key(entry.Name)
	ids, err := a.identitiesFor(st.Path(key), entry)
	if err != nil {
		return err
	}
	if err := a.verify(ctx, st, key, entry, ids); err != nil {
		if errors.Is(err, pipeline.ErrCorrupted) {
			return fmt.Errorf("refusing to import: %w; the target database was not touched", err)
		}
		return fmt.Errorf("cannot verify %s, the target database was not touched: %w", st.Path(key), err)
	}
	if err := a.refuseRecordedSource(ctx, "import", a.cfg.Engine, entry, tc, false); err != nil {
		return err
	}
	if err := eng.Prepare(ctx); err != nil {
		return fmt.Errorf("prepare target database %q: %w", tc.Database, err)
	}
	if a.cfg.Engine == "postgres" && entry.Inventory != nil {
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
