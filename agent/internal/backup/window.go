package backup

import (
	"context"
	"errors"

	"cairn.dev/agent/contract"
	"cairn.dev/agent/internal/pitr"
	"cairn.dev/agent/internal/store"
)

// maxReportedGaps bounds the gaps a result names (the BackupJob's status
// holds as many).
const maxReportedGaps = 16

// pointInTimeWindow reads what the archive (binary log or WAL) can recover
// after a backup's prune: from the end of the oldest kept base to the newest archived
// change, and every break in the log (docs/pitr.md). The backup operator
// records it in the BackupJob's status.pointInTime.
func (b *Runner) pointInTimeWindow(ctx context.Context, st store.Store) (*contract.PointInTimeWindow, error) {
	cat, _, err := b.LoadIndex(ctx, st)
	if err != nil {
		return nil, err
	}
	dir := b.cfg.BackupJob.BinlogDir()
	if b.cfg.Engine == "postgres" {
		dir = b.cfg.BackupJob.WALDir()
	}
	ix, err := pitr.LoadIndex(ctx, st, dir)
	if err != nil {
		return nil, err
	}
	w := &contract.PointInTimeWindow{Segments: len(ix.Files())}
	for _, e := range cat.Entries {
		if (e.BinlogBase != nil || e.WALBase != nil) && (w.Earliest.IsZero() || e.End.Before(w.Earliest)) {
			w.Earliest = e.End.UTC()
		}
	}
	if newest, ok := ix.Newest(); ok {
		// Its last change, the switch or flush that closed it, or the
		// archiver's proof of quiet after it.
		w.Latest, w.LastSegment = ix.WindowFrom(pitr.Base{File: newest.File}).Latest.UTC(), newest.File
	}
	for _, g := range ix.Gaps() {
		if len(w.Gaps) == maxReportedGaps {
			break
		}
		w.Gaps = append(w.Gaps, g.String())
	}
	return w, nil
}

// windowError gives a refused point-in-time restore its failure code: a
// time outside the window, or a gap on the way to it (the restore
// operator names them in the RestoreJob's condition).
func windowError(err error) error {
	switch {
	case errors.Is(err, pitr.ErrOutsideWindow):
		return &contract.CodedError{Code: contract.CodeOutsideWindow, Err: err}
	case errors.Is(err, pitr.ErrGap):
		return &contract.CodedError{Code: contract.CodeArchiveGap, Err: err}
	}
	return err
}
