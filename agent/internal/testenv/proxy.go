package testenv

import (
	"io"
	"net"
	"sync"
	"sync/atomic"
)

// StallProxy forwards TCP connections to a target and stops forwarding the
// target's replies after Limit bytes in total: the client then waits for
// data that never comes. It lets a test catch a backup mid-stream.
type StallProxy struct {
	Limit   int64
	target  string
	ln      net.Listener
	passed  atomic.Int64
	stalled chan struct{}
	once    sync.Once
	mu      sync.Mutex
	conns   []net.Conn
}

// NewStallProxy listens on a free port of 127.0.0.1.
func NewStallProxy(target string, limit int64) (*StallProxy, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	p := &StallProxy{Limit: limit, target: target, ln: ln, stalled: make(chan struct{})}
	go p.serve()
	return p, nil
}

// Port is the proxy's port.
func (p *StallProxy) Port() int { return p.ln.Addr().(*net.TCPAddr).Port }

// Stalled is closed once Limit bytes have passed.
func (p *StallProxy) Stalled() <-chan struct{} { return p.stalled }

// Passed is the number of reply bytes forwarded.
func (p *StallProxy) Passed() int64 { return p.passed.Load() }

func (p *StallProxy) track(c net.Conn) {
	p.mu.Lock()
	p.conns = append(p.conns, c)
	p.mu.Unlock()
}

func (p *StallProxy) serve() {
	for {
		c, err := p.ln.Accept()
		if err != nil {
			return
		}
		t, err := net.Dial("tcp", p.target)
		if err != nil {
			c.Close()
			continue
		}
		p.track(c)
		p.track(t)
		go func() { _, _ = io.Copy(t, c) }()
		go p.forward(c, t)
	}
}

func (p *StallProxy) forward(dst, src net.Conn) {
	buf := make([]byte, 32<<10)
	for {
		room := p.Limit - p.passed.Load()
		if room <= 0 {
			p.once.Do(func() { close(p.stalled) })
			return // stop reading: the client waits forever
		}
		n, err := src.Read(buf[:min(int64(len(buf)), room)])
		if n > 0 {
			if _, werr := dst.Write(buf[:n]); werr != nil {
				return
			}
			p.passed.Add(int64(n))
		}
		if err != nil {
			dst.Close()
			return
		}
	}
}

// Close closes the listener and every connection.
func (p *StallProxy) Close() {
	p.ln.Close()
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, c := range p.conns {
		c.Close()
	}
}
