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

// Backup runs the dumps of engs at once, each through a Splitter, into
// parts under dir (the artifact's parts directory), each stored by
// pipeline.Backup (zstd, age, SHA-256), then writes the index under key.
// Several engs are several dumps of disjoint tables (their caller makes
// them one snapshot); each gives its own schema and post part. Nothing is
// listed: the caller writes the manifest. On failure the parts written are
// deleted (what a failed deletion leaves, prune sweeps once the run's
// marker is gone).
func Backup(ctx context.Context, engs []engine.Engine, st store.Store, key, dir string, enc pipeline.Encoding, o Options) (pipeline.Written, *Index, error) {
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	if o.PartSize <= 0 {
		o.PartSize = DefaultPartSize
	}
	// Each dump holds one data part open; a dump starting its next part
	// waits for a slot while its last one is still being stored.
	w := &writer{ctx: ctx, cancel: cancel, st: st, dir: dir, enc: enc, o: o,
		slots: make(chan struct{}, max(o.Parallelism, len(engs)+1, 1)), schemas: make([]Part, len(engs)), posts: make([]Part, len(engs))}
	streams := make([]*stream, len(engs))
	errs := make([]error, len(engs))
	var wg sync.WaitGroup
	for i, eng := range engs {
		streams[i] = &stream{w: w, i: i}
		wg.Add(1)
		go func() {
			defer wg.Done()
			sp := NewSplitter(streams[i])
			err := eng.Dump(ctx, sp)
			if err == nil {
				err = sp.Close()
			}
			if err == nil {
				streams[i].closeAll()
			} else {
				cancel(err) // stop the other dumps
				streams[i].abort(err)
			}
			errs[i] = err
		}()
	}
	wg.Wait()
	err := firstErr(errs, ctx)
	if err == nil {
		err = w.finish()
	} else {
		w.wg.Wait()
	}
	if err != nil {
		w.removeAll()
		return pipeline.Written{}, nil, err
	}
	x := &Index{Kind: Kind, Version: Version, Engine: engs[0].Name(), Format: engs[0].Format(), Compression: "zstd",
		Encrypted: enc.Recipients != nil, Parts: w.done}
	written, err := putIndex(ctx, st, key, x)
	if err != nil {
		w.removeAll()
		return pipeline.Written{}, nil, err
	}
	return written, x, nil
}

// putIndex stores x under key as it is (small, never encrypted), with a
// known length.
func putIndex(ctx context.Context, st store.Store, key string, x *Index) (pipeline.Written, error) {
	data := x.Encode()
	n, err := st.Put(ctx, key, bytes.NewReader(data))
	if err == nil && n != int64(len(data)) {
		err = fmt.Errorf("store %s stored %d bytes of %s, expected %d", st, n, key, len(data))
	}
	if err != nil {
		return pipeline.Written{}, fmt.Errorf("write parts index: %w", err)
	}
	return pipeline.Written{Size: int64(len(data)), Checksum: checksum(data)}, nil
}

// firstErr is the error that stopped the dumps: a part's store error
// (the cause), else the first dump's own.
func firstErr(errs []error, ctx context.Context) error {
	var pe *partError
	if c := context.Cause(ctx); errors.As(c, &pe) {
		return c
	}
	for _, err := range errs {
		if err != nil && !errors.Is(err, context.Canceled) {
			return err
		}
	}
	for _, err := range errs {
		if err != nil {
			return err
		}
	}
	return nil
}

// partError is a part that could not be stored.
type partError struct {
	name string
	err  error
}

func (e *partError) Error() string { return "part " + e.name + ": " + e.err.Error() }
func (e *partError) Unwrap() error { return e.err }

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

// writer stores the parts of every stream.
type writer struct {
	ctx    context.Context
	cancel context.CancelCauseFunc
	st     store.Store
	dir    string
	enc    pipeline.Encoding
	o      Options
	slots  chan struct{}
	wg     sync.WaitGroup

	mu      sync.Mutex
	n       int      // data parts started
	indexes []Part   // index statements, stored at finish
	stmts   [][]byte // their SQL
	schemas []Part   // per stream, once stored
	posts   []Part
	data    []Part // data parts stored, in order of their number
	done    []Part // every part, in the index's order, once finish ran
	errs    []error
}

// stream is the Sink of one dump.
type stream struct {
	w            *writer
	i            int
	preamble     []byte
	schema, post *part
	cur          *part // the data part being written
}

type part struct {
	Part
	pw *io.PipeWriter
}

func (s *stream) Preamble(p []byte) error {
	s.preamble = append([]byte(nil), p...)
	var err error
	if s.schema, err = s.start(PhaseSchema, "", fmt.Sprintf("schema-%02d", s.i)); err != nil {
		return err
	}
	s.post, err = s.start(PhasePost, "", fmt.Sprintf("post-%02d", s.i))
	return err
}

func (s *stream) Write(phase, table string, p []byte) error {
	w := s.w
	var t *part
	switch phase {
	case PhaseSchema:
		t = s.schema
	case PhasePost:
		t = s.post
	case PhaseIndex:
		w.mu.Lock()
		w.indexes = append(w.indexes, Part{Name: fmt.Sprintf("index-%05d%s", len(w.indexes)+1, w.o.Extension), Phase: PhaseIndex, Table: table})
		w.stmts = append(w.stmts, append(append([]byte(nil), s.preamble...), p...))
		w.mu.Unlock()
		return nil
	default:
		if s.cur != nil && s.cur.Table != table {
			s.cur.pw.Close()
			s.cur = nil
		}
		if s.cur == nil {
			w.mu.Lock()
			w.n++
			n := w.n
			w.mu.Unlock()
			var err error
			if s.cur, err = s.start(PhaseData, table, fmt.Sprintf("data-%05d", n)); err != nil {
				return err
			}
		}
		t = s.cur
	}
	if t == nil {
		return fmt.Errorf("%w: %s bytes before the header ended", ErrFormat, phase)
	}
	n, err := t.pw.Write(p)
	t.RawSize += int64(n)
	return err
}

func (s *stream) StatementEnd(table string) error {
	if s.cur != nil && s.cur.RawSize >= s.w.o.PartSize {
		s.cur.pw.Close() // stored once its goroutine ends
		s.cur = nil
	}
	return nil
}

// start begins storing a part; a data part first waits for a slot. The
// schema and post parts stay open the whole dump but are small: held
// compressed in memory and stored with a known length (spooled), so that
// they hold no S3 part buffer meanwhile.
func (s *stream) start(phase, table, base string) (*part, error) {
	w := s.w
	slot := phase == PhaseData
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
			st = spooled{w.st}
		}
		wr, err := pipeline.Backup(w.ctx, pipeEngine{r: pr}, st, path.Join(w.dir, t.Name), w.enc)
		pr.CloseWithError(err) // unblock a writer if the store failed first
		w.mu.Lock()
		defer w.mu.Unlock()
		if err != nil {
			pe := &partError{t.Name, err}
			w.errs = append(w.errs, pe)
			w.cancel(pe)
			return
		}
		// The pipe ended: t.RawSize is final.
		p := t.Part
		p.Size, p.Checksum = wr.Size, wr.Checksum
		switch phase {
		case PhaseData:
			w.data = append(w.data, p)
			for i := len(w.data) - 1; i > 0 && w.data[i-1].Name > w.data[i].Name; i-- {
				w.data[i-1], w.data[i] = w.data[i], w.data[i-1]
			}
		case PhaseSchema:
			w.schemas[s.i] = p
		default:
			w.posts[s.i] = p
		}
	}()
	if _, err := pw.Write(s.preamble); err != nil {
		return nil, err
	}
	t.RawSize = int64(len(s.preamble))
	return t, nil
}

func (s *stream) closeAll() {
	for _, t := range []*part{s.cur, s.schema, s.post} {
		if t != nil {
			t.pw.Close()
		}
	}
}

func (s *stream) abort(err error) {
	for _, t := range []*part{s.cur, s.schema, s.post} {
		if t != nil {
			t.pw.CloseWithError(err)
		}
	}
}

func (w *writer) finish() error {
	w.wg.Wait()
	if len(w.errs) > 0 {
		return errors.Join(w.errs...)
	}
	for i := range w.schemas {
		if w.schemas[i].Name == "" || w.posts[i].Name == "" {
			return fmt.Errorf("%w: dump %d had no header", ErrFormat, i)
		}
	}
	// The index statements, small: one part each, one at a time.
	for i := range w.indexes {
		p := &w.indexes[i]
		wr, err := pipeline.Backup(w.ctx, rawEngine{data: w.stmts[i]}, spooled{w.st}, path.Join(w.dir, p.Name), w.enc)
		if err != nil {
			return &partError{p.Name, err}
		}
		p.RawSize, p.Size, p.Checksum = int64(len(w.stmts[i])), wr.Size, wr.Checksum
		w.mu.Lock()
		w.data = append(w.data, *p)
		w.mu.Unlock()
	}
	w.done = append(append(append([]Part(nil), w.schemas...), w.data...), w.posts...)
	return nil
}

// removeAll deletes the parts stored so far.
func (w *writer) removeAll() {
	ctx := context.WithoutCancel(w.ctx)
	w.mu.Lock()
	defer w.mu.Unlock()
	for _, p := range append(append(append([]Part(nil), w.schemas...), w.data...), w.posts...) {
		if p.Name != "" {
			_ = w.st.Delete(ctx, path.Join(w.dir, p.Name))
		}
	}
}
