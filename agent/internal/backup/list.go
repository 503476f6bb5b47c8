package backup

import (
	"context"
	"fmt"
	"text/tabwriter"
	"time"

	"cairn.dev/agent/contract"
	"cairn.dev/agent/internal/catalog"
	"cairn.dev/agent/internal/store"
)

// List prints the catalog's artifacts to stdout (JSON lines, or a table)
// and returns the catalog report, newest first.
func (b *Runner) List(ctx context.Context) ([]byte, error) {
	st, err := b.OpenStore()
	if err != nil {
		return nil, err
	}
	if err := st.Check(ctx); err != nil {
		return nil, err
	}
	cat, _, err := b.LoadIndex(ctx, st)
	if err != nil {
		return nil, err
	}
	job := b.cfg.BackupJob
	if b.cfg.Output == "table" {
		tw := tabwriter.NewWriter(b.stdout, 0, 4, 2, ' ', 0)
		fmt.Fprintln(tw, "ARTIFACT\tSIZE\tCHECKSUM\tSTART\tDURATION\tENGINE")
		for _, e := range cat.Entries {
			fmt.Fprintf(tw, "%s\t%d\t%s…\t%s\t%.1fs\t%s\n", st.Path(job.Key(e.Name)), e.Size,
				e.Checksum[:len("sha256:")+12], e.Start.Format(time.RFC3339), e.DurationSeconds, e.Engine)
		}
		tw.Flush()
	} else {
		for _, e := range cat.Entries {
			line, err := contract.Marshal(EntryResult(st, job.Key(e.Name), e))
			if err != nil {
				return nil, err
			}
			b.stdout.Write(line)
		}
	}
	report := contract.Catalog{Summary: b.summary("list", st, cat, 0)}
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

func (b *Runner) summary(cmd string, st store.Store, cat *catalog.Catalog, deleted int) contract.Summary {
	s := contract.Summary{Command: cmd, BackupJob: b.cfg.BackupJob.String(), Count: len(cat.Entries), Deleted: deleted}
	if e, ok := cat.Newest(); ok {
		s.Newest = st.Path(b.cfg.BackupJob.Key(e.Name))
	}
	return s
}
