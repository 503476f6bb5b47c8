package backup

import (
	"context"
	"errors"

	"cairn.dev/agent/internal/catalog"
	"cairn.dev/agent/internal/crypt"
	"cairn.dev/agent/internal/pipeline"
	"cairn.dev/agent/internal/store"
)

// encoding is how backup (and a migration's export) encodes the dump: the
// configured zstd level, encrypted to the configured recipients if any.
func (b *Runner) encoding() pipeline.Encoding {
	return pipeline.Encoding{Level: pipeline.Level(b.cfg.Compression), Recipients: b.cfg.Recipients}
}

// IdentitiesFor returns the identities that decrypt entry (nil for an
// artifact that is not encrypted), or the coded error naming the
// recipients it needs when none was given or none is a recipient. It reads
// nothing from the store: the catalog records the recipients.
func (b *Runner) IdentitiesFor(path string, entry catalog.Entry) (*crypt.Identities, error) {
	if entry.Encryption == nil {
		return nil, nil
	}
	if err := crypt.Match(path, entry.Encryption, b.cfg.Identities); err != nil {
		return nil, annotateUntouched(err)
	}
	return b.cfg.Identities, nil
}

// Verify reads the artifact whole before the target is touched: size and
// checksum, and for an encrypted one, that the identity opens it and every
// chunk authenticates.
func (b *Runner) Verify(ctx context.Context, st store.Store, key string, entry catalog.Entry, ids *crypt.Identities) error {
	err := pipeline.Verify(ctx, st, key, entry.Size, entry.Checksum, ids)
	if errors.Is(err, pipeline.ErrNoIdentityMatch) {
		// The catalog said the key is a recipient, the artifact's header
		// says it is not: the manifest does not describe these bytes.
		return annotateUntouched(crypt.Mismatch(st.Path(key), entry.Encryption, ids))
	}
	return err
}

// untouchedError appends that nothing was written to the target, keeping
// the coded error (errors.As still finds it).
type untouchedError struct{ err error }

func (e *untouchedError) Error() string {
	return e.err.Error() + "; the target database was not touched"
}
func (e *untouchedError) Unwrap() error { return e.err }

func annotateUntouched(err error) error { return &untouchedError{err} }
