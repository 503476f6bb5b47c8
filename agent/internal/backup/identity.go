package backup

import (
	"context"

	"cairn.dev/agent/internal/catalog"
	"cairn.dev/agent/internal/engine"
	"cairn.dev/agent/internal/identity"
)

// RecordIdentity reads the identity of the database a backup or export
// dumps, for its manifest. A failure is a warning: the artifact is good
// without it, but restores of it cannot recognise its source.
func (b *Runner) RecordIdentity(ctx context.Context, engineName string, c engine.Conn) *identity.ID {
	id, exists, err := identity.Read(ctx, engineName, c)
	switch {
	case err != nil:
		b.log.Warn("the source's server identity was not recorded: restores cannot recognise it", "error", err)
		return nil
	case !exists:
		return nil
	case id.Server == "":
		b.log.Warn("the source's server did not identify itself: restores cannot recognise it", "reason", id.Unknown)
	}
	return &id
}

// RefuseRecordedSource refuses to write into tc when it is the database
// entry was taken of (identity.CheckRecorded), unless allow. A target that
// cannot be compared is logged, not refused: the operators' admission
// check (by address) still stands before it.
func (b *Runner) RefuseRecordedSource(ctx context.Context, action, engineName string, entry catalog.Entry, tc engine.Conn, allow bool) error {
	if allow {
		b.log.Info("allowOverwriteSource: the target may be the database the artifact was taken of")
		return nil
	}
	checked, why, err := identity.CheckRecorded(ctx, engineName, action, entry.Source, tc)
	if err != nil {
		return err
	}
	if !checked {
		b.log.Warn("the target was not compared with the artifact's source", "reason", why)
	}
	return nil
}
