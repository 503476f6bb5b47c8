package engine

import (
	"archive/tar"
	"context"
	"errors"
	"io"
	"sync"
)

// PostgresBase takes a physical base backup of the whole cluster with
// `pg_basebackup --pgdata=- --format=tar --wal-method=fetch
// --checkpoint=fast`: one tar stream on stdout, compressed and stored by
// the agent like every artifact (nothing of it on disk), with the WAL from
// its start to its consistent point inside (pg_wal/), so the base alone is
// restorable; the archived WAL brings it further (point-in-time
// recovery). Needs a role with REPLICATION, and the cluster's data in its
// default tablespaces (pg_basebackup writes other tablespaces to files of
// their own, not to stdout).
type PostgresBase struct {
	Conn
	mu    sync.Mutex
	label []byte
}

func (p *PostgresBase) Name() string   { return "postgres" }
func (p *PostgresBase) Format() string { return "pg_basebackup-tar" }

// BackupLabel is the backup_label the last Dump's stream held.
func (p *PostgresBase) BackupLabel() []byte {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.label
}

func (p *PostgresBase) Dump(ctx context.Context, w io.Writer) error {
	conninfo := "host=" + QuoteConninfo(p.Host) + " port=" + QuoteConninfo(itoa(p.Port)) +
		" user=" + QuoteConninfo(p.User) + ToolsNoCleartext()
	pg := &Postgres{Conn: p.Conn}
	// The stream is read on the way for its backup_label (where the base
	// starts in the WAL).
	pr, pw := io.Pipe()
	scanned := make(chan struct{})
	go func() {
		defer close(scanned)
		tr := tar.NewReader(pr)
		for {
			h, err := tr.Next()
			if err != nil {
				break
			}
			if h.Name == "backup_label" || h.Name == "./backup_label" {
				b, _ := io.ReadAll(io.LimitReader(tr, 64<<10))
				p.mu.Lock()
				p.label = b
				p.mu.Unlock()
				break
			}
		}
		io.Copy(io.Discard, pr)
	}()
	err := run(ctx, p.Password, nil, io.MultiWriter(w, pw), pg.env(), "pg_basebackup",
		"--dbname="+conninfo, "--no-password", "--pgdata=-", "--format=tar", "--wal-method=fetch",
		"--checkpoint=fast", "--no-manifest", "--label=cairn-agent point-in-time base")
	pw.Close()
	<-scanned
	return err
}

// ErrPhysicalBase: a physical base is restored by recovery, not by a
// restore tool.
var ErrPhysicalBase = errors.New("a physical base backup is restored through a temporary server (point-in-time recovery), not streamed into a restore tool")

func (p *PostgresBase) Prepare(context.Context) error            { return ErrPhysicalBase }
func (p *PostgresBase) Restore(context.Context, io.Reader) error { return ErrPhysicalBase }
