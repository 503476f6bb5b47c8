package testenv

import (
	"net"
	"strconv"
	"testing"
)

// FreePort's ports are below the kernel's ephemeral range (which outgoing
// connections take from) and free on every address, so a server
// listening on ":port" gets it.
func TestFreePortBelowEphemeralRangeAndFreeOnEveryAddress(t *testing.T) {
	lo := ephemeralLow()
	if lo == 0 {
		t.Fatal("cannot read /proc/sys/net/ipv4/ip_local_port_range")
	}
	for range 20 {
		port, err := FreePort()
		if err != nil {
			t.Fatal(err)
		}
		if port < freePortLow || port >= min(lo, 32000) {
			t.Fatalf("port %d: want %d ≤ port < %d (below the ephemeral range, starting at %d)", port, freePortLow, min(lo, 32000), lo)
		}
		l, err := net.Listen("tcp", ":"+strconv.Itoa(port))
		if err != nil {
			t.Fatalf("port %d on every address: %v", port, err)
		}
		l.Close()
	}
}
