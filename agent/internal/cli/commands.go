package cli

import (
	"context"
	"errors"
	"fmt"
	"text/tabwriter"
	"time"

	"cairn.dev/agent/contract"
	"cairn.dev/agent/internal/catalog"
	"cairn.dev/agent/internal/checks"
	"cairn.dev/agent/internal/engine"
	"cairn.dev/agent/internal/inventory"
	"cairn.dev/agent/internal/naming"
	"cairn.dev/agent/internal/parts"
	"cairn.dev/agent/internal/pipeline"
	"cairn.dev/agent/internal/store"
)

func (a *app) backup(ctx context.Context) ([]byte, error) {
	cfg := a.cfg
	if cfg.Engine == "" {
		return nil, errors.New("engine is not set: CAIRN_ENGINE or --engine must be postgres or mysql")
	}
	eng, err := engine.New(cfg.Engine, cfg.DB)
	if err != nil {
		return nil, err
	}
	st, err := a.openStore()
	if err != nil {
		return nil, err
	}
	// Fail early, before dumping anything, if the store is unreachable.
	if err := st.Check(ctx); err != nil {
		return nil, err
	}

	job := cfg.BackupJob
	start := a.now().Truncate(time.Millisecond)
	// The token keeps two runs started in the same millisecond (a run-now
	// beside a scheduled run, two clusters sharing a bucket) apart: every
	// run writes objects no other run writes.
	name, err := naming.ArtifactNameToken(job, eng.Name(), start, naming.NewToken())
	if err != nil {
		return nil, err
	}
	if name, err = a.multipartName(eng, name); err != nil {
		return nil, err
	}
	if cfg.Recipients != nil {
		name += naming.ExtEncrypted
	}
	key := job.Key(name)
	a.log.Info("backup started", "engine", eng.Name(), "host", cfg.DB.Host, "port", cfg.DB.Port,
		"database", cfg.DB.Database, "user", cfg.DB.User, "store", st.String(), "artifact", st.Path(key))

	// The marker tells a concurrent prune that this artifact (and its
	// upload) is being written; it is removed only once the manifest lists
	// the artifact.
	stopMarker, err := a.startMarker(ctx, st, name, start)
	if err != nil {
		return nil, err
	}
	defer func() {
		if stopMarker != nil {
			stopMarker()
		}
	}()

	// With S3 Object Lock, the artifact and its manifest are written locked
	// (until start + the lock days); markers are not.
	locked := a.lockedStore(st, start)
	w, inv, invErr, err := a.dumpWithInventory(ctx, eng, cfg.DB, locked, key, inventory.Options{Method: cfg.Inventory})
	if err != nil {
		return nil, err
	}
	if invErr != nil {
		// The backup is good without it; restores cannot check row counts.
		a.log.Warn("backup has no inventory", "error", invErr)
	}
	end := a.now().Truncate(time.Millisecond)
	entry := catalog.Entry{
		Name:            name,
		Size:            w.Size,
		Checksum:        w.Checksum,
		Start:           start,
		End:             end,
		DurationSeconds: seconds(end.Sub(start)),
		Engine:          eng.Name(),
		Format:          eng.Format(),
		Compression:     "zstd",
		AgentVersion:    a.version,
		Inventory:       inv,
		Source:          a.recordIdentity(ctx, eng.Name(), cfg.DB),
	}
	if cfg.Recipients != nil {
		entry.Encryption = cfg.Recipients.Record()
	}
	a.recordParts(&entry)
	a.log.Info("artifact written", "artifact", st.Path(key), "size", w.Size, "checksum", w.Checksum,
		"encryptedTo", entry.EncryptedTo(), "parts", entry.Parts, "partsSize", entry.PartsSize)

	// Only now, with the artifact complete, is it listed: its own
	// manifest, which no other run writes or rewrites.
	if err := a.writeManifest(ctx, locked, entry); err != nil {
		return nil, fmt.Errorf("artifact %s was written but is not listed: %w", st.Path(key), err)
	}
	stopMarker()
	stopMarker = nil
	a.log.Info("artifact listed", "manifest", st.Path(job.ManifestKey(name)))

	res := entryResult(st, key, entry)
	if a.retains() && cfg.Prune {
		s, err := a.pruneStore(ctx, st)
		if err != nil {
			a.log.Warn("prune after backup failed; the backup itself succeeded", "error", err)
		}
		res.Retention = s.Retention
	}
	return contract.MarshalResult(res)
}

func (a *app) restore(ctx context.Context) (line []byte, err error) {
	cfg := a.cfg
	st, err := a.openStore()
	if err != nil {
		return nil, err
	}
	if err := st.Check(ctx); err != nil {
		return nil, err
	}
	cat, _, err := a.loadIndex(ctx, st)
	if err != nil {
		return nil, err
	}
	job := cfg.BackupJob
	if len(cat.Entries) == 0 {
		return nil, fmt.Errorf("no backups of %s in %s: nothing to restore", job, st)
	}
	var entry catalog.Entry
	if cfg.Artifact == "" {
		entry, _ = cat.Newest()
	} else {
		var ok bool
		if entry, ok = cat.Find(cfg.Artifact); !ok {
			return nil, fmt.Errorf("artifact %q is not in the catalog of %s in %s (agent list shows what is)", cfg.Artifact, job, st)
		}
	}
	engineName := cfg.Engine
	if engineName == "" {
		engineName = entry.Engine
	} else if engineName != entry.Engine {
		return nil, fmt.Errorf("artifact %s is a %s backup, but the engine is set to %s", entry.Name, entry.Engine, engineName)
	}
	eng, err := engine.New(engineName, cfg.DB)
	if err != nil {
		return nil, err
	}
	key := job.Key(entry.Name)
	start := a.now().Truncate(time.Millisecond)
	// An encrypted artifact needs one of its recipients' identities: say
	// which before reading it, and before the target is touched.
	ids, err := a.identitiesFor(st.Path(key), entry)
	if err != nil {
		return nil, err
	}
	a.log.Info("verifying artifact", "artifact", st.Path(key), "size", entry.Size, "checksum", entry.Checksum, "store", st.String(),
		"encryptedTo", entry.EncryptedTo())
	var x *parts.Index
	if naming.Multipart(entry.Name) {
		x, err = a.verifyParts(ctx, st, entry, ids)
	} else {
		err = a.verify(ctx, st, key, entry, ids)
	}
	if err != nil {
		if errors.Is(err, pipeline.ErrCorrupted) {
			return nil, fmt.Errorf("refusing to restore: %w; the target database was not touched", err)
		}
		return nil, fmt.Errorf("cannot verify %s, the target database was not touched: %w", st.Path(key), err)
	}
	a.log.Info("restore started", "engine", eng.Name(), "host", cfg.DB.Host, "port", cfg.DB.Port,
		"database", cfg.DB.Database, "user", cfg.DB.User)
	tgt, ok := eng.(engine.Target)
	if !ok {
		return nil, fmt.Errorf("engine %s cannot prepare a target", eng.Name())
	}
	// Before anything is written: is the target the database the backup
	// was taken of, under whatever address? The servers say.
	if err := a.refuseRecordedSource(ctx, "restore", engineName, entry, cfg.DB, cfg.AllowOverwriteSource); err != nil {
		return nil, err
	}
	marker := ""
	if cfg.DropTargetAfterChecks {
		marker = ScratchMarker(job)
	}
	own, err := tgt.CreateTarget(ctx, marker)
	if err != nil {
		return nil, fmt.Errorf("prepare target database %q: %w", cfg.DB.Database, err)
	}
	// created: this run created the target (not an earlier attempt).
	created := own
	if own && cfg.DropTargetAfterChecks {
		// A scratch database is dropped on every path to failure too.
		defer func() {
			if err != nil {
				err = a.dropScratchAfterFailure(tgt, marker, created, err)
			}
		}()
	}
	if x != nil {
		err = a.restoreParts(ctx, st, entry, x, ids, eng)
	} else {
		err = pipeline.Restore(ctx, st, key, entry.Size, entry.Checksum, ids, eng)
	}
	if err != nil {
		return nil, err
	}
	end := a.now().Truncate(time.Millisecond)
	r := entryResult(st, key, entry)
	r.Start, r.End, r.DurationSeconds = start, end, seconds(end.Sub(start))
	r.TargetCreated = own
	a.log.Info("restore finished", "artifact", r.Artifact, "durationSeconds", r.DurationSeconds, "targetCreated", own)

	if len(cfg.Checks) > 0 {
		q, err := checks.For(eng, cfg.CheckTimeout)
		if err != nil {
			return nil, err
		}
		r.Checks = checks.Run(ctx, q, cfg.Checks, a.rowCounts(eng, entry))
		for _, c := range r.Checks {
			a.log.Info("check", "name", c.Name, "passed", c.Passed, "value", c.Value, "message", c.Message)
		}
		if ctx.Err() != nil {
			// Stopped (the pod deleted) while the checks ran: no verdict.
			return nil, fmt.Errorf("stopped while the checks ran: %w", ctx.Err())
		}
	}
	if cfg.RecordVerification {
		a.recordVerification(ctx, st, entry, &r)
	}
	if cfg.DropTargetAfterChecks {
		// Only after the checks ran, and only the restore's own target.
		switch {
		case !own:
			r.DropError = engine.ErrNotOwn.Error()
		default:
			if err := a.dropScratch(ctx, tgt, marker, created); err != nil {
				r.DropError = err.Error()
			} else {
				r.TargetDropped = true
			}
		}
		if r.DropError != "" {
			a.log.Warn("target database not dropped", "database", cfg.DB.Database, "reason", r.DropError)
		} else {
			a.log.Info("target database dropped", "database", cfg.DB.Database)
		}
	}
	return contract.MarshalResult(r)
}

// ScratchMarker is recorded on a target database a restore creates to drop
// it after its checks (PostgreSQL: the database's comment), so a retried
// restore from the same catalog key recognises it as its own.
func ScratchMarker(job naming.Job) string {
	return "cairn-agent: scratch database of a verification restore of " + job.String() + "; dropped after its checks"
}

// rowCounts compares the restored tables' row counts with those the backup
// recorded in entry's manifest (its inventory, taken in the dump's
// snapshot). Every recorded table must be in the target with that many
// rows; tables only in the target (a restore into an existing database) are
// not the backup's and are not compared. Nil when the backup recorded no
// row counts (an older agent, or CAIRN_INVENTORY=None).
func (a *app) rowCounts(eng engine.Engine, entry catalog.Entry) checks.RowCounts {
	rec := entry.Inventory
	if rec == nil || rec.Method == inventory.MethodList {
		return nil
	}
	var conn engine.Conn
	switch e := eng.(type) {
	case *engine.Postgres:
		conn = e.Conn
	case *engine.MySQL:
		conn = e.Conn
	default:
		return nil
	}
	return func(ctx context.Context) (string, []string, error) {
		got, err := inventory.Take(ctx, eng.Name(), conn, inventory.Options{Method: inventory.MethodRowCount})
		if err != nil {
			return "", nil, fmt.Errorf("counting the restored tables: %w", err)
		}
		var recorded int64
		for _, t := range rec.Tables {
			recorded += t.Rows
		}
		summary := fmt.Sprintf("%d table(s), %d row(s) recorded", len(rec.Tables), recorded)
		var diffs []string
		for _, c := range inventory.Compare(rec, got, inventory.MethodRowCount).Items {
			switch {
			case c.Match || c.SourceRows < 0:
				// equal, or only in the target
			case c.TargetRows < 0:
				diffs = append(diffs, fmt.Sprintf("%s: missing, %d recorded", c.Table, c.SourceRows))
			default:
				diffs = append(diffs, fmt.Sprintf("%s: %d restored, %d recorded", c.Table, c.TargetRows, c.SourceRows))
			}
		}
		return summary, diffs, nil
	}
}

func (a *app) list(ctx context.Context) ([]byte, error) {
	st, err := a.openStore()
	if err != nil {
		return nil, err
	}
	if err := st.Check(ctx); err != nil {
		return nil, err
	}
	cat, _, err := a.loadIndex(ctx, st)
	if err != nil {
		return nil, err
	}
	job := a.cfg.BackupJob
	if a.cfg.Output == "table" {
		tw := tabwriter.NewWriter(a.stdout, 0, 4, 2, ' ', 0)
		fmt.Fprintln(tw, "ARTIFACT\tSIZE\tCHECKSUM\tSTART\tDURATION\tENGINE")
		for _, e := range cat.Entries {
			fmt.Fprintf(tw, "%s\t%d\t%s…\t%s\t%.1fs\t%s\n", st.Path(job.Key(e.Name)), e.Size,
				e.Checksum[:len("sha256:")+12], e.Start.Format(time.RFC3339), e.DurationSeconds, e.Engine)
		}
		tw.Flush()
	} else {
		for _, e := range cat.Entries {
			line, err := contract.Marshal(entryResult(st, job.Key(e.Name), e))
			if err != nil {
				return nil, err
			}
			a.stdout.Write(line)
		}
	}
	report := contract.Catalog{Summary: a.summary("list", st, cat, 0)}
	for i := len(cat.Entries) - 1; i >= 0; i-- { // newest first
		e := cat.Entries[i]
		ce := contract.CatalogEntry{Path: st.Path(job.Key(e.Name)), Size: e.Size, Checksum: e.Checksum, End: e.End, Engine: e.Engine,
			EncryptedTo: e.EncryptedTo()}
		if inv := e.Inventory; inv != nil {
			ce.Tables = len(inv.Tables)
			for _, t := range inv.Tables {
				ce.Rows += t.Rows
			}
		}
		report.Artifacts = append(report.Artifacts, ce)
	}
	return contract.MarshalCatalog(report)
}

func (a *app) summary(cmd string, st store.Store, cat *catalog.Catalog, deleted int) contract.Summary {
	s := contract.Summary{Command: cmd, BackupJob: a.cfg.BackupJob.String(), Count: len(cat.Entries), Deleted: deleted}
	if e, ok := cat.Newest(); ok {
		s.Newest = st.Path(a.cfg.BackupJob.Key(e.Name))
	}
	return s
}
