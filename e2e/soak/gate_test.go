package soak

import (
	"bufio"
	"io"
	"net"
	"testing"
	"time"
)

// echo serves lines back on a free loopback port.
func echo(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() { defer c.Close(); _, _ = io.Copy(c, c) }()
		}
	}()
	return ln.Addr().String()
}

func roundTrip(c net.Conn, msg string) (string, error) {
	_ = c.SetDeadline(time.Now().Add(5 * time.Second))
	if _, err := c.Write([]byte(msg + "\n")); err != nil {
		return "", err
	}
	return bufio.NewReader(c).ReadString('\n')
}

// The gate forwards; down, its port refuses and the open connection is
// cut; up again, it forwards on the same address.
func TestGateGoesDownAndComesBackOnItsAddress(t *testing.T) {
	g, err := NewGate(echo(t))
	if err != nil {
		t.Fatal(err)
	}
	defer g.Close()
	c, err := net.Dial("tcp", g.Endpoint())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if got, err := roundTrip(c, "before"); err != nil || got != "before\n" {
		t.Fatalf("through the gate: %q, %v", got, err)
	}
	g.Down()
	if got, err := roundTrip(c, "during"); err == nil {
		t.Fatalf("an open connection still works while the gate is down: %q", got)
	}
	if c2, err := net.DialTimeout("tcp", g.Endpoint(), time.Second); err == nil {
		c2.Close()
		t.Fatalf("%s accepts a connection while the gate is down", g.Endpoint())
	}
	if err := g.Up(); err != nil {
		t.Fatal(err)
	}
	c3, err := net.Dial("tcp", g.Endpoint())
	if err != nil {
		t.Fatalf("the gate is up again but %s refuses: %v", g.Endpoint(), err)
	}
	defer c3.Close()
	if got, err := roundTrip(c3, "after"); err != nil || got != "after\n" {
		t.Fatalf("through the gate again: %q, %v", got, err)
	}
}
