package backup

import (
	"context"
	"fmt"

	"cairn.dev/agent/contract"
	"cairn.dev/agent/internal/catalog"
	"cairn.dev/agent/internal/engine"
	"cairn.dev/agent/internal/toolset"
)

// dumpTools detects the source server and chooses this image's tools that
// can dump it (toolset.Dump) before anything is written: a server no tool
// serves fails the backup at once with a *toolset.UnsupportedError.
func (b *Runner) dumpTools(ctx context.Context) (*contract.ServerInfo, error) {
	s, choice, err := toolset.Prepare(ctx, b.cfg.Engine, b.cfg.DB, b.cfg.DB.Database, toolset.Dump)
	if err != nil {
		return nil, err
	}
	b.log.Info("database server", "server", s.String(), "tools", choice.Describe())
	return s.Info(), nil
}

// restoreTools detects the target server (through its maintenance
// database: the target may not exist yet) and chooses this image's tools
// that can restore into it (toolset.Restore). A point-in-time restore of a
// PostgreSQL base recorded with its source's version also needs the
// PostgreSQL server of exactly that major (toolset.Recover), whose tools
// then do the whole restore.
func (b *Runner) restoreTools(ctx context.Context, engineName string, entry catalog.Entry, pointInTime bool) (*contract.ServerInfo, error) {
	s, choice, err := toolset.Prepare(ctx, engineName, b.cfg.DB, "", toolset.Restore)
	if err != nil {
		return nil, err
	}
	// A PostgreSQL archive of a source newer than the target was written by
	// a pg_dump of at least the source's major: pg_restore must be of that
	// major too (older ones cannot read its format).
	if !pointInTime && engineName == "postgres" && entry.Server != nil {
		src, err := toolset.ParseVersion(entry.Server.Engine, entry.Server.Version)
		if err == nil && src.Major > choice.PGMajor {
			need := s
			need.Major = src.Major
			rc, err := toolset.Scan(ctx).Choose(need, toolset.Restore)
			if err != nil {
				return nil, &contract.CodedError{Code: contract.CodeUnsupportedServer, Err: &toolset.UnsupportedError{
					Server: s, Supported: fmt.Sprintf("pg_restore %d, which cannot read an archive of %s (written by pg_dump %d or newer)", choice.PGMajor, src, src.Major),
					Need: fmt.Sprintf("restore it with an agent image with PostgreSQL %d (or newer) tools", src.Major)}}
			}
			rc.Apply()
			engine.PGVersions(rc.PGMajor, s.Major)
			choice = rc
		}
	}
	if pointInTime && engineName == "postgres" && entry.Server != nil {
		src := toolset.Server{Engine: entry.Server.Engine, Version: entry.Server.Version}
		if src, err = toolset.ParseVersion(src.Engine, src.Version); err != nil {
			return nil, err
		}
		rc, err := toolset.Scan(ctx).Choose(src, toolset.Recover)
		if err != nil {
			return nil, &contract.CodedError{Code: contract.CodeUnsupportedServer, Err: err}
		}
		rc.Apply()
		// The restore's target is s, whatever the source's major.
		engine.PGVersions(rc.PGMajor, s.Major)
		choice = rc
	}
	b.log.Info("database server", "server", s.String(), "tools", choice.Describe())
	return s.Info(), nil
}
