package parts

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"path"
	"sync"

	"cairn.dev/agent/internal/engine"
	"cairn.dev/agent/internal/pipeline"
	"cairn.dev/agent/internal/store"
)

// DefaultPartSize is the SQL (before compression) a data part holds at
// most, give or take one statement: a 1 GB dump becomes ~32 parts, enough
// to keep a few connections busy, each part one transaction on restore.
const DefaultPartSize = 32 << 20

// Options of a multi-part backup.
type Options struct {
	// Parallelism is how many data parts are compressed and stored at
	// once (at least 1): memory grows by one encoder and one store upload
	// buffer per part in flight.
	Parallelism int
	// PartSize is DefaultPartSize unless set.
	PartSize int64
	// Extension is the parts' file name extension (".sql.zst", ".sql.zst.age").
	Extension string
}

// Backup runs eng's dump through a Splitter into parts under dir (the
// artifact's parts directory), each stored by pipeline.Backup (zstd, age,
// SHA-256), then writes the index under key. Nothing is listed: the
// caller writes the manifest. On failure the parts written are deleted
// (what a failed deletion leaves, prune sweeps once the run's marker is
// gone).
func Backup(ctx context.Context, eng engine.Engine, st store.Store, key, dir string, enc pipeline.Encoding, o Options) (pipeline.Written, *Index, error) {
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	if o.PartSize <= 0 {
		o.PartSize = DefaultPartSize
	}
	w := &writer{ctx: ctx, cancel: cancel, st: st, dir: dir, enc: enc, o: o, slots: make(chan struct{}, max(o.Parallelism, 1))}
	sp := NewSplitter(w)
	err := eng.Dump(ctx, sp)
	if err == nil {
		err = sp.Close()
	}
	if err == nil {
		err = w.finish()
	} else {
		w.abort(err)
	}
	if err != nil {
		w.removeAll()
		if c := context.Cause(ctx); c != nil && !errors.Is(c, context.Canceled) {
			return pipeline.Written{}, nil, c // a part's store error stopped the dump
		}
		return pipeline.Written{}, nil, err
	}
	x := &Index{Kind: Kind, Version: Version, Engine: eng.Name(), Format: eng.Format(), Compression: "zstd",
		Encrypted: enc.Recipients != nil, Parts: w.done}
	data := x.Encode()
	// Stored as it is (small, never encrypted), with a known length.
	n, err := st.Put(ctx, key, bytes.NewReader(data))
	if err == nil && n != int64(len(data)) {
		err = fmt.Errorf("store %s stored %d bytes of %s, expected %d", st, n, key, len(data))
	}
	if err != nil {
		w.removeAll()
		return pipeline.Written{}, nil, fmt.Errorf("write parts index: %w", err)
	}
	return pipeline.Written{Size: int64(len(data)), Checksum: checksum(data)}, x, nil
}

func checksum(b []byte) string {
	h := sha256.Sum256(b)
	return pipeline.ChecksumPrefix + hex.EncodeToString(h[:])
}

// spooled stores what it is given once it was read whole: one PUT of a
// known length (no multipart upload buffer) for the small parts. A failed
// read stores nothing, as Store.Put requires.
type spooled struct{ store.Store }

func (s spooled) Put(ctx context.Context, key string, r io.Reader) (int64, error) {
	var b bytes.Buffer
	if _, err := b.ReadFrom(r); err != nil {
		return 0, err
	}
	return s.Store.Put(ctx, key, bytes.NewReader(b.Bytes()))
}

// rawEngine "dumps" data (an index part's SQL).
type rawEngine struct {
	engine.Engine
	data []byte
}

func (r rawEngine) Dump(ctx context.Context, w io.Writer) error {
	_, err := w.Write(r.data)
	return err
}

// pipeEngine "dumps" what is written to a part's pipe.
type pipeEngine struct {
	engine.Engine
	r io.Reader
}

func (p pipeEngine) Dump(ctx context.Context, w io.Writer) error {
	_, err := io.CopyBuffer(w, p.r, make([]byte, 128<<10))
	return err
}

// writer is the Sink that stores parts.
type writer struct {
	ctx    context.Context
	cancel context.CancelCauseFunc
	st     store.Store
	dir    string
	enc    pipeline.Encoding
	o      Options
	slots  chan struct{}

	preamble     []byte
	schema, post *part
	cur          *part // the data part being written
	n            int   // data parts started

	indexes []Part   // index statements, stored at finish
	stmts   [][]byte // their SQL

	mu   sync.Mutex
	wg   sync.WaitGroup
	done []Part // schema, data…, post once finish ran
	data []Part // data parts stored, in order of their number
	errs []error
}

type part struct {
	Part
	pw  *io.PipeWriter
	seq int
}

func (w *writer) Preamble(p []byte) error {
	w.preamble = append([]byte(nil), p...)
	var err error
	if w.schema, err = w.start(PhaseSchema, "", "schema", false); err != nil {
		return err
	}
	w.post, err = w.start(PhasePost, "", "post", false)
	return err
}

func (w *writer) Write(phase, table string, p []byte) error {
	var t *part
	switch phase {
	case PhaseSchema:
		t = w.schema
	case PhasePost:
		t = w.post
	case PhaseIndex:
		w.indexes = append(w.indexes, Part{Name: fmt.Sprintf("index-%05d%s", len(w.indexes)+1, w.o.Extension), Phase: PhaseIndex, Table: table})
		w.stmts = append(w.stmts, append(append([]byte(nil), w.preamble...), p...))
		return nil
	default:
		if w.cur != nil && w.cur.Table != table {
			w.closePart(w.cur)
			w.cur = nil
		}
		if w.cur == nil {
			w.n++
			var err error
			if w.cur, err = w.start(PhaseData, table, fmt.Sprintf("data-%05d", w.n), true); err != nil {
				return err
			}
			w.cur.seq = w.n
		}
		t = w.cur
	}
	if t == nil {
		return fmt.Errorf("%w: %s bytes before the header ended", ErrFormat, phase)
	}
	n, err := t.pw.Write(p)
	t.RawSize += int64(n)
	return err
}

func (w *writer) StatementEnd(table string) error {
	if w.cur != nil && w.cur.RawSize >= w.o.PartSize {
		w.closePart(w.cur)
		w.cur = nil
	}
	return nil
}

// start begins storing a part; a data part first waits for a slot.
func (w *writer) start(phase, table, base string, slot bool) (*part, error) {
	if slot {
		select {
		case w.slots <- struct{}{}:
		case <-w.ctx.Done():
			return nil, context.Cause(w.ctx)
		}
	}
	pr, pw := io.Pipe()
	t := &part{Part: Part{Name: base + w.o.Extension, Phase: phase, Table: table}, pw: pw}
	w.wg.Add(1)
	go func() {
		defer w.wg.Done()
		if slot {
			defer func() { <-w.slots }()
		}
		st := w.st
		if !slot {
			// The schema and post parts stay open the whole dump but
			// are small: held compressed in memory and stored with a known
			// length, so that they hold no S3 part buffer meanwhile.
			st = spooled{w.st}
		}
		wr, err := pipeline.Backup(w.ctx, pipeEngine{r: pr}, st, path.Join(w.dir, t.Name), w.enc)
		pr.CloseWithError(err) // unblock a writer if the store failed first
		w.mu.Lock()
		defer w.mu.Unlock()
		if err != nil {
			w.errs = append(w.errs, fmt.Errorf("part %s: %w", t.Name, err))
			w.cancel(fmt.Errorf("part %s: %w", t.Name, err))
			return
		}
		p := t.Part
		p.Size, p.Checksum = wr.Size, wr.Checksum
		if phase == PhaseData {
			w.data = append(w.data, p)
			for i := len(w.data) - 1; i > 0 && w.data[i-1].Name > w.data[i].Name; i-- {
				w.data[i-1], w.data[i] = w.data[i], w.data[i-1]
			}
		} else {
			w.done = append(w.done, p)
		}
	}()
	if _, err := pw.Write(w.preamble); err != nil {
		return nil, err
	}
	t.RawSize = int64(len(w.preamble))
	return t, nil
}

// closePart ends a part's stream: it is stored once its goroutine ends.
// The RawSize recorded is the one at close (the goroutine copies the Part
// only after the pipe's end).
func (w *writer) closePart(t *part) {
	w.mu.Lock()
	t.pw.Close()
	w.mu.Unlock()
}

func (w *writer) finish() error {
	for _, t := range []*part{w.cur, w.schema, w.post} {
		if t != nil {
			w.closePart(t)
		}
	}
	w.wg.Wait()
	if len(w.errs) > 0 {
		return errors.Join(w.errs...)
	}
	if len(w.done) != 2 {
		return fmt.Errorf("%w: no header", ErrFormat)
	}
	schema, post := w.done[0], w.done[1]
	if schema.Phase != PhaseSchema {
		schema, post = post, schema
	}
	// The index statements, small: one part each, one at a time.
	for i := range w.indexes {
		p := &w.indexes[i]
		wr, err := pipeline.Backup(w.ctx, rawEngine{data: w.stmts[i]}, spooled{w.st}, path.Join(w.dir, p.Name), w.enc)
		if err != nil {
			return fmt.Errorf("part %s: %w", p.Name, err)
		}
		p.RawSize, p.Size, p.Checksum = int64(len(w.stmts[i])), wr.Size, wr.Checksum
		w.mu.Lock()
		w.data = append(w.data, *p)
		w.mu.Unlock()
	}
	w.done = append(append([]Part{schema}, w.data...), post)
	return nil
}

func (w *writer) abort(err error) {
	w.cancel(err)
	for _, t := range []*part{w.cur, w.schema, w.post} {
		if t != nil {
			t.pw.CloseWithError(err)
		}
	}
	w.wg.Wait()
}

// removeAll deletes the parts stored so far.
func (w *writer) removeAll() {
	ctx := context.WithoutCancel(w.ctx)
	w.mu.Lock()
	defer w.mu.Unlock()
	for _, p := range append(append([]Part(nil), w.done...), w.data...) {
		_ = w.st.Delete(ctx, path.Join(w.dir, p.Name))
	}
}
