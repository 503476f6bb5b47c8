package cli

import (
	"bytes"
	"errors"
	"testing"
)

// recordingCounter is a rowCounter that keeps what it was given.
type recordingCounter struct {
	got    bytes.Buffer
	closed error
	closes int
}

func (r *recordingCounter) Write(p []byte) (int, error) { return r.got.Write(p) }
func (r *recordingCounter) CloseWithError(err error) error {
	r.closed, r.closes = err, r.closes+1
	return nil
}

// The counter behind the dump gets every write in order, even though the
// writer reuses its buffer as soon as Write returns, and it is closed only
// after it has read them all.
func TestBehindKeepsOrderAndCopies(t *testing.T) {
	rc := &recordingCounter{}
	b := newBehind(rc)
	var want bytes.Buffer
	buf := make([]byte, 100)
	for i := range 10 * behindDepth {
		n := 1 + i*7%len(buf)
		for j := range n {
			buf[j] = byte(i + j)
		}
		want.Write(buf[:n])
		if m, err := b.Write(buf[:n]); m != n || err != nil {
			t.Fatalf("write %d: %d, %v", i, m, err)
		}
		clear(buf) // the caller's buffer changes after Write
	}
	dumpErr := errors.New("dump failed")
	b.CloseWithError(dumpErr)
	b.CloseWithError(nil) // a second close changes nothing
	if !bytes.Equal(rc.got.Bytes(), want.Bytes()) {
		t.Fatalf("the counter read %d bytes, want %d, or not in order", rc.got.Len(), want.Len())
	}
	if rc.closes != 1 || rc.closed != dumpErr {
		t.Fatalf("counter closed %d times with %v, want once with the dump's error", rc.closes, rc.closed)
	}
}
