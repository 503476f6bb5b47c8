package soak

import (
	"fmt"
	"io"
	"net"
	"strconv"
	"sync"
	"time"

	"cairn.dev/agent/testservers"
)

// Gate is the S3 server's address as the soak's BackupJobs and RestoreJobs
// know it: a TCP forwarder to the real server (versitygw) that the fault
// schedule takes down — its port then refuses connections and every open
// connection is cut, as when the server is stopped — and brings back on the
// same port. The port is below the kernel's ephemeral range, so no other
// listener takes it while the gate is down.
type Gate struct {
	target string
	port   int

	mu    sync.Mutex
	ln    net.Listener
	conns map[net.Conn]struct{}
}

// NewGate forwards a port of 127.0.0.1 to target ("host:port").
func NewGate(target string) (*Gate, error) {
	// Below the kernel's ephemeral range: the gate goes down and must find
	// its port free when it comes back (testservers.FreePort).
	port, err := testservers.FreePort()
	if err != nil {
		return nil, err
	}
	g := &Gate{target: target, port: port, conns: map[net.Conn]struct{}{}}
	return g, g.Up()
}

// Endpoint is the gate's host:port.
func (g *Gate) Endpoint() string { return "127.0.0.1:" + strconv.Itoa(g.port) }

// Up listens again (a few retries: the closed port may linger a moment).
func (g *Gate) Up() error {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.ln != nil {
		return nil
	}
	var err error
	for i := 0; i < 50; i++ {
		var ln net.Listener
		if ln, err = net.Listen("tcp", g.Endpoint()); err == nil {
			g.ln = ln
			go g.serve(ln)
			return nil
		}
		time.Sleep(100 * time.Millisecond)
	}
	return fmt.Errorf("soak: the S3 gate cannot listen on %s again: %w", g.Endpoint(), err)
}

// Down closes the port and cuts every connection through it.
func (g *Gate) Down() {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.ln != nil {
		g.ln.Close()
		g.ln = nil
	}
	for c := range g.conns {
		c.Close()
		delete(g.conns, c)
	}
}

// Close is Down for good.
func (g *Gate) Close() { g.Down() }

func (g *Gate) serve(ln net.Listener) {
	for {
		c, err := ln.Accept()
		if err != nil {
			return
		}
		go g.pipe(c)
	}
}

func (g *Gate) track(cs ...net.Conn) bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.ln == nil { // went down meanwhile
		return false
	}
	for _, c := range cs {
		g.conns[c] = struct{}{}
	}
	return true
}

func (g *Gate) forget(cs ...net.Conn) {
	g.mu.Lock()
	defer g.mu.Unlock()
	for _, c := range cs {
		delete(g.conns, c)
		c.Close()
	}
}

func (g *Gate) pipe(c net.Conn) {
	t, err := net.DialTimeout("tcp", g.target, 5*time.Second)
	if err != nil {
		c.Close()
		return
	}
	if !g.track(c, t) {
		c.Close()
		t.Close()
		return
	}
	done := make(chan struct{}, 2)
	go func() { _, _ = io.Copy(t, c); done <- struct{}{} }()
	go func() { _, _ = io.Copy(c, t); done <- struct{}{} }()
	<-done
	g.forget(c, t)
}
