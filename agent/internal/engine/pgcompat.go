package engine

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"io"
)

// PostgreSQL 17's and 18's pg_restore open every restore with
// "SET transaction_timeout = 0;" (its fixed session state), a setting no
// server before 17 knows: with --exit-on-error the restore into a 13, 15 or
// 16 server fails on it before restoring anything. Such a restore (tools
// of 17 or newer, a server older than 17; toolset tells which) goes
// through the script form instead, as the direct copy does: pg_restore
// --file=- writes the SQL, that one line is left out, and psql runs the
// rest in one transaction (RunScript), so the target is still all or
// nothing.

// setTransactionTimeout is the line left out.
var setTransactionTimeout = []byte("SET transaction_timeout = 0;")

// PGVersions records the run's PostgreSQL tools' major and the server's
// (toolset.Choice.Apply); 0 when unknown.
func PGVersions(tools, server int) {
	toolsMu.Lock()
	defer toolsMu.Unlock()
	pgToolMajor, pgServerMajor = tools, server
}

var pgToolMajor, pgServerMajor int

// needsScriptRestore: the tools write a setting the server refuses.
func needsScriptRestore() bool {
	toolsMu.RLock()
	defer toolsMu.RUnlock()
	return pgToolMajor >= 17 && pgServerMajor > 0 && pgServerMajor < 17
}

// restoreViaScript restores the archive read from r through pg_restore
// --file=- (extra: its selection) and psql in one transaction, without
// the settings the server does not know.
func (p *Postgres) restoreViaScript(ctx context.Context, r io.Reader, extra ...string) error {
	pr, pw := io.Pipe()
	done := make(chan error, 1)
	go func() {
		err := p.Script(ctx, r, pw, extra...)
		pw.CloseWithError(err) // nil: a clean end, psql commits
		done <- err
	}()
	err := p.RunScript(ctx, &dropSettings{r: bufio.NewReaderSize(pr, 64<<10)})
	pr.CloseWithError(errors.New("psql ended"))
	serr := <-done
	var se *StreamError
	if serr != nil && (err == nil || errors.As(err, &se)) {
		// psql was killed because the script broke: pg_restore's error is
		// the reason.
		return serr
	}
	return err
}

// dropSettings passes a pg_restore script through without the lines
// equal to setTransactionTimeout outside COPY data (a row's text is never
// touched: COPY … FROM stdin; starts data, a line "\." ends it).
type dropSettings struct {
	r      *bufio.Reader
	buf    []byte // what is left of the current line to hand out
	inCopy bool
	midLn  bool // the last piece read did not end its line
	err    error
}

func (d *dropSettings) Read(p []byte) (int, error) {
	for len(d.buf) == 0 {
		if d.err != nil {
			return 0, d.err
		}
		line, err := d.r.ReadSlice('\n')
		if err != nil && !errors.Is(err, bufio.ErrBufferFull) {
			d.err = err
		}
		start := !d.midLn
		d.midLn = errors.Is(err, bufio.ErrBufferFull)
		if start && !d.midLn {
			text := bytes.TrimRight(line, "\r\n")
			switch {
			case d.inCopy:
				d.inCopy = !bytes.Equal(text, []byte(`\.`))
			case bytes.Equal(text, setTransactionTimeout):
				continue
			case bytes.HasPrefix(text, []byte("COPY ")) && bytes.HasSuffix(text, []byte(" FROM stdin;")):
				d.inCopy = true
			}
		} else if start && bytes.HasPrefix(line, []byte("COPY ")) {
			// A COPY statement longer than the buffer: its end decides.
			d.inCopy = true
		}
		d.buf = append(d.buf[:0], line...)
	}
	n := copy(p, d.buf)
	d.buf = d.buf[n:]
	return n, nil
}
