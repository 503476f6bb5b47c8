package pitr

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"strings"
	"time"

	"cairn.dev/agent/internal/crypt"
	"cairn.dev/agent/internal/store"
)

// Segment is one archived binary log file (or WAL segment): its stored
// object (<dir>/<file>.zst, or <dir>/<file>.zst.age when encrypted) and the
// record next to it (<dir>/<file>.json), written after the object, so a
// record names only a whole, durable segment. The record holds no data of
// the log: names, sizes, times, counts and the recipients.
type Segment struct {
	File string `json:"file"`
	// Size and Checksum ("sha256:<hex>") of the stored (compressed) bytes.
	Size     int64  `json:"size"`
	Checksum string `json:"checksum"`
	// RawSize is the binary log file's own length.
	RawSize int64 `json:"rawSize"`
	// First and Last: the seconds of its first and last logged events.
	First time.Time `json:"first,omitzero"`
	Last  time.Time `json:"last,omitzero"`
	// Events counts its logged events.
	Events int `json:"events"`
	// Next is the file the server continued in; empty after a stop.
	Next string `json:"next,omitempty"`
	// Stopped: the server shut down at its end.
	Stopped bool `json:"stopped,omitempty"`
	// ClosedBy is the time of the FLUSH BINARY LOGS the archiver issued
	// that closed it, when it did: every change committed before it is in
	// this segment or an earlier one.
	ClosedBy time.Time `json:"closedBy,omitzero"`
	// ArchivedAt is when the archiver stored it.
	ArchivedAt time.Time `json:"archivedAt"`
	// Timeline is a PostgreSQL WAL segment's timeline (File names it too);
	// zero for a binary log file.
	Timeline int `json:"timeline,omitempty"`
	// Encryption, when the archive is encrypted: the recipients its object
	// (<file>.zst.age: zstd, then age) is encrypted to, as a dump's
	// manifest records them. Any one of their identities decrypts it.
	Encryption *crypt.Encryption `json:"encryption,omitempty"`
}

// covers is the newest second this segment (with those before it) is known
// to hold every change of: the flush that closed it, else its last event.
func (s Segment) covers() time.Time {
	if s.ClosedBy.After(s.Last) {
		return s.ClosedBy
	}
	return s.Last
}

// Index is the archive's segments by file name.
type Index struct {
	Dir      string
	Segments map[string]Segment
	// Covered, when the archiver recorded one (an idle server): every
	// change before Covered.At is in the segments up to Covered.Through.
	Covered *Covered
}

// coversThrough is the newest second the archive holds every change of,
// given that its continuous chain ends at segment cur.
func (ix *Index) coversThrough(cur Segment) time.Time {
	t := cur.covers()
	if c := ix.Covered; c != nil && c.Through == cur.File && c.At.After(t) {
		if newest, _ := ix.Newest(); newest.File == cur.File {
			t = c.At
		}
	}
	return t
}

// logFileKind names what file is: a PostgreSQL WAL segment or a binary log
// file.
func logFileKind(file string) string {
	if len(file) == walNameLen {
		return "WAL segment"
	}
	return "binary log file"
}

// quietFrom: file is the binary log file the server continued in after the
// newest archived segment, and the archiver's proof of quiet says nothing
// was written in it until the time returned — so a base taken in it (a
// dump of an idle server) is recoverable up to then with no segment. Not
// for WAL: a PostgreSQL base's own segments hold its backup's start and
// end, so they are always needed.
func (ix *Index) quietFrom(file string) (time.Time, bool) {
	c := ix.Covered
	newest, ok := ix.Newest()
	if c == nil || !ok || len(file) == walNameLen || c.Through != newest.File || newest.Next == "" || newest.Next != file {
		return time.Time{}, false
	}
	return c.At, true
}

// LoadIndex reads every segment record under dir. Objects without their
// record (an upload the archiver did not finish) are not segments.
func LoadIndex(ctx context.Context, st store.Store, dir string) (*Index, error) {
	objs, err := st.List(ctx, dir)
	if err != nil {
		return nil, fmt.Errorf("listing the log archive %s: %w", st.Path(dir), err)
	}
	ix := &Index{Dir: dir, Segments: map[string]Segment{}}
	for _, o := range objs {
		if o.Key == CoveredKey(dir) {
			rc, err := st.Get(ctx, o.Key)
			if err != nil {
				return nil, err
			}
			var c Covered
			err = json.NewDecoder(rc).Decode(&c)
			rc.Close()
			if err == nil {
				ix.Covered = &c
			}
			continue
		}
		if !strings.HasSuffix(o.Key, ".json") {
			continue
		}
		rc, err := st.Get(ctx, o.Key)
		if err != nil {
			return nil, err
		}
		var s Segment
		err = json.NewDecoder(rc).Decode(&s)
		rc.Close()
		if err != nil {
			return nil, fmt.Errorf("segment record %s: %w", st.Path(o.Key), err)
		}
		// The name becomes a local file's and store keys' (a replay's
		// folder, prune's deletes): only a log file's own name, the one
		// its record is stored under.
		if !validSegmentName(s.File) || recordKey(dir, s.File) != o.Key || s.Next != "" && !validSegmentName(s.Next) {
			return nil, fmt.Errorf("segment record %s names the file %q (next %q): not a log file's name stored under that record; the archive was changed by hand or by someone else: %w",
				st.Path(o.Key), s.File, s.Next, ErrBadRecord)
		}
		ix.Segments[s.File] = s
	}
	return ix, nil
}

// ErrBadRecord: a segment record names a file that is not a log file of
// its archive.
var ErrBadRecord = errors.New("a segment record does not name its own log file")

// validSegmentName: a WAL segment's or binary log file's name (letters,
// digits, '.', '_', '-'; no path, no "..").
func validSegmentName(f string) bool {
	if f == "" || len(f) > 255 || strings.Contains(f, "..") || f[0] == '.' || f[0] == '-' {
		return false
	}
	for _, c := range f {
		if !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '.' || c == '_' || c == '-') {
			return false
		}
	}
	return true
}

// Files are the archived files in order.
func (ix *Index) Files() []string {
	out := make([]string, 0, len(ix.Segments))
	for f := range ix.Segments {
		out = append(out, f)
	}
	sort.Strings(out)
	return out
}

// Newest is the last archived segment, if any.
func (ix *Index) Newest() (Segment, bool) {
	files := ix.Files()
	if len(files) == 0 {
		return Segment{}, false
	}
	return ix.Segments[files[len(files)-1]], true
}

// Gap is a break in the archive: after segment After, the server continued
// in Missing, which is not archived, though later files are.
type Gap struct {
	After, Missing string `json:",omitempty"`
	// Timeline, for a WAL archive, names the segment of another timeline
	// archived in Missing's place: the break is a timeline change.
	Timeline string `json:",omitempty"`
}

func (g Gap) String() string {
	if g.Timeline != "" {
		return fmt.Sprintf("%s is missing: the server continued on another timeline after %s (%s); a recovery does not cross a timeline change", g.Missing, g.After, g.Timeline)
	}
	return fmt.Sprintf("%s is missing (the server continued in it after %s)", g.Missing, g.After)
}

// Gaps lists every break in the archive: a segment whose next file is not
// archived while newer ones are (the newest segment's next file is the one
// being written, not a gap).
func (ix *Index) Gaps() []Gap {
	files := ix.Files()
	var gaps []Gap
	for i, f := range files {
		s := ix.Segments[f]
		if i == len(files)-1 || s.Next == "" && !s.Stopped {
			continue
		}
		next := s.Next
		if s.Stopped {
			next = nextFile(f)
		}
		if _, ok := ix.Segments[next]; !ok {
			gaps = append(gaps, ix.gap(f, next))
		}
	}
	return gaps
}

// gap is the break after file after, whose successor missing is not
// archived; a WAL segment of the same number on another timeline makes it
// a timeline change.
func (ix *Index) gap(after, missing string) Gap {
	g := Gap{After: after, Missing: missing}
	if len(missing) == walNameLen {
		for _, f := range ix.Files() {
			if len(f) == walNameLen && f[8:] == missing[8:] && f != missing {
				g.Timeline = f
				break
			}
		}
	}
	return g
}

// nextFile is the file after f in the server's numbering (mysql-bin.000007
// → mysql-bin.000008), as the server continues after a stop.
func nextFile(f string) string {
	dot := strings.LastIndexByte(f, '.')
	if dot < 0 {
		return ""
	}
	num := f[dot+1:]
	n := 0
	for _, c := range num {
		if c < '0' || c > '9' {
			return ""
		}
		n = n*10 + int(c-'0')
	}
	return fmt.Sprintf("%s.%0*d", f[:dot], len(num), n+1)
}

// ErrOutsideWindow: the requested time is not recoverable from the archive.
var ErrOutsideWindow = errors.New("outside the recoverable window")

// ErrGap: the chain to the requested time crosses a break in the archive.
var ErrGap = errors.New("the archive has a gap")

// Chain returns the segments to replay from file from (the base's binary
// log file) up to time until (zero: everything archived, "latest"): the
// continuous run of segments from from, ending at the first that covers
// until. It refuses a chain with a gap (naming the missing file), and a
// time after the newest archived second or before from's first change.
//
// A base in the binary log file opened after the newest segment, with a
// proof of quiet for it (quietFrom), needs no segment: its chain is empty
// up to the proof's time.
func (ix *Index) Chain(from string, until time.Time) ([]Segment, error) {
	cur, ok := ix.Segments[from]
	if !ok {
		if quiet, ok := ix.quietFrom(from); ok {
			if !until.IsZero() && until.After(quiet) {
				return nil, fmt.Errorf("%s is after the newest archived change (%s, nothing written in %s since): %w", until.UTC().Format(time.RFC3339),
					quiet.UTC().Format(time.RFC3339), from, ErrOutsideWindow)
			}
			return []Segment{}, nil
		}
		return nil, fmt.Errorf("the base's %s %s is not archived under %s: %w", logFileKind(from), from, ix.Dir, ErrOutsideWindow)
	}
	var out []Segment
	for {
		out = append(out, cur)
		if !until.IsZero() && !cur.covers().Before(until) {
			return out, nil
		}
		next := cur.Next
		if cur.Stopped {
			next = nextFile(cur.File)
		}
		s, ok := ix.Segments[next]
		if !ok {
			break
		}
		cur = s
	}
	// The chain ends at its newest segment: is that the archive's end, or a gap?
	if newest, _ := ix.Newest(); newest.File != cur.File {
		return nil, fmt.Errorf("%w after %s: %s; nothing after it can be recovered from this base", ErrGap, cur.File,
			ix.gap(cur.File, cur.Next).String())
	}
	if through := ix.coversThrough(cur); !until.IsZero() && until.After(through) {
		if through.IsZero() {
			// A segment with no commit in it (a base's own, say).
			return nil, fmt.Errorf("%s is after the newest archived change (none with a commit time yet, through %s): %w", until.UTC().Format(time.RFC3339),
				cur.File, ErrOutsideWindow)
		}
		return nil, fmt.Errorf("%s is after the newest archived change (%s, in %s): %w", until.UTC().Format(time.RFC3339),
			through.UTC().Format(time.RFC3339), cur.File, ErrOutsideWindow)
	}
	return out, nil
}

// Window is what the archive can recover from a base: from the base's
// snapshot to the newest second its continuous chain covers.
type Window struct {
	// Latest is the newest recoverable second from the base (zero when
	// the base's file is not archived yet).
	Latest time.Time
	// Through is the last segment of the base's continuous chain.
	Through string
	// Gap is the first break after the base, if the chain stops at one.
	Gap *Gap
}

// WindowFrom is the window the archive gives base.
func (ix *Index) WindowFrom(base Base) Window {
	cur, ok := ix.Segments[base.File]
	if !ok {
		if quiet, ok := ix.quietFrom(base.File); ok {
			newest, _ := ix.Newest()
			return Window{Latest: quiet, Through: newest.File}
		}
		return Window{}
	}
	for {
		next := cur.Next
		if cur.Stopped {
			next = nextFile(cur.File)
		}
		s, ok := ix.Segments[next]
		if !ok {
			w := Window{Latest: ix.coversThrough(cur), Through: cur.File}
			if newest, _ := ix.Newest(); newest.File != cur.File {
				g := ix.gap(cur.File, next)
				w.Gap = &g
			}
			return w
		}
		cur = s
	}
}

// Prunable lists the segments no kept base can use: those before the
// oldest kept base's file (a base replays from its own file on). With no
// base kept, nothing is prunable — the log waits for its next base rather
// than being dropped under a failing backup.
func (ix *Index) Prunable(kept []Base) []string {
	if len(kept) == 0 {
		return nil
	}
	oldest := kept[0].File
	for _, b := range kept[1:] {
		if b.File < oldest {
			oldest = b.File
		}
	}
	var out []string
	for _, f := range ix.Files() {
		if f < oldest {
			out = append(out, f)
		}
	}
	return out
}

// Covers is the newest second segment s makes recoverable: its last event,
// or the flush that closed it when that came later (nothing was written
// between).
func (s Segment) Covers() time.Time { return s.covers() }
