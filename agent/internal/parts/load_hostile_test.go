package parts

import (
	"bufio"
	"context"
	"io"
	"net"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"cairn.dev/agent/internal/engine"
	"cairn.dev/agent/internal/loaddata"
)

// A hostile MySQL server answers the agent's LOAD DATA LOCAL INFILE by
// asking for another file (a secret of the agent pod's). No real server
// does that on request, so this one speaks just enough of the protocol:
// the handshake (any password), OK to every statement, the one result the
// driver asks for (max_allowed_packet), and, to a LOAD DATA, the request
// for a file: the reader the statement names (honest) or the secret.
type fakeServer struct {
	l      net.Listener
	ask    func(reader string) string // the file to ask for
	got    chan []byte                // what the client sent for it
	loads  chan string                // the LOAD DATA statements
	failed chan error
}

func startFake(t *testing.T, ask func(string) string) *fakeServer {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	f := &fakeServer{l: l, ask: ask, got: make(chan []byte, 1), loads: make(chan string, 1), failed: make(chan error, 1)}
	t.Cleanup(func() { l.Close() })
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			go f.serve(c)
		}
	}()
	return f
}

func (f *fakeServer) port() int { return f.l.Addr().(*net.TCPAddr).Port }

type pconn struct {
	r   *bufio.Reader
	w   io.Writer
	seq byte
}

func (p *pconn) read() ([]byte, error) {
	var h [4]byte
	if _, err := io.ReadFull(p.r, h[:]); err != nil {
		return nil, err
	}
	n := int(h[0]) | int(h[1])<<8 | int(h[2])<<16
	p.seq = h[3] + 1
	b := make([]byte, n)
	_, err := io.ReadFull(p.r, b)
	return b, err
}

func (p *pconn) write(b []byte) error {
	h := []byte{byte(len(b)), byte(len(b) >> 8), byte(len(b) >> 16), p.seq}
	p.seq++
	_, err := p.w.Write(append(h, b...))
	return err
}

func lenenc(s string) []byte { return append([]byte{byte(len(s))}, s...) }

var (
	okPacket  = []byte{0x00, 0, 0, 0x02, 0, 0, 0}
	eofPacket = []byte{0xfe, 0, 0, 0x02, 0}
	readerRE  = regexp.MustCompile(`'Reader::([^']+)'`)
)

func (f *fakeServer) serve(c net.Conn) {
	defer c.Close()
	p := &pconn{r: bufio.NewReader(c), w: c}
	// Greeting: protocol 10, mysql_native_password, no TLS; LOCAL FILES,
	// PROTOCOL_41, SECURE_CONNECTION, PLUGIN_AUTH, TRANSACTIONS.
	caps := uint32(0x1 | 0x8 | 0x80 | 0x200 | 0x2000 | 0x8000 | 0x80000)
	g := []byte{10}
	g = append(g, "5.5.5-10.11.0-fake\x00"...)
	g = append(g, 1, 0, 0, 0)
	g = append(g, "abcdefgh"...)
	g = append(g, 0, byte(caps), byte(caps>>8), 45, 2, 0, byte(caps>>16), byte(caps>>24), 21)
	g = append(g, make([]byte, 10)...)
	g = append(g, "ijklmnopqrst\x00"...)
	g = append(g, "mysql_native_password\x00"...)
	if p.write(g) != nil {
		return
	}
	if _, err := p.read(); err != nil { // the handshake response: any password
		return
	}
	p.write(okPacket)
	for {
		cmd, err := p.read()
		if err != nil || len(cmd) == 0 {
			return
		}
		if cmd[0] != 0x03 { // not a query (ping, quit, ...)
			if cmd[0] == 0x01 {
				return
			}
			p.write(okPacket)
			continue
		}
		q := string(cmd[1:])
		switch {
		case strings.Contains(q, "@@max_allowed_packet"):
			p.write([]byte{1})
			col := append(lenenc("def"), lenenc("")...)
			col = append(col, lenenc("")...)
			col = append(col, lenenc("")...)
			col = append(col, lenenc("@@max_allowed_packet")...)
			col = append(col, lenenc("")...)
			col = append(col, 0x0c, 45, 0, 20, 0, 0, 0, 0xfd, 0, 0, 0, 0, 0)
			p.write(col)
			p.write(eofPacket)
			p.write(lenenc("67108864"))
			p.write(eofPacket)
		case strings.HasPrefix(q, "LOAD DATA"):
			f.loads <- q
			name := ""
			if m := readerRE.FindStringSubmatch(q); m != nil {
				name = m[1]
			}
			p.write(append([]byte{0xfb}, f.ask(name)...))
			var got []byte
			for {
				b, err := p.read()
				if err != nil {
					f.failed <- err
					return
				}
				if len(b) == 0 {
					break
				}
				got = append(got, b...)
			}
			f.got <- got
			p.write(okPacket)
		default:
			p.write(okPacket)
		}
	}
}

func TestLoadRefusesAHostileServersFileRequest(t *testing.T) {
	secret := filepath.Join(t.TempDir(), "identity.txt")
	if err := os.WriteFile(secret, []byte("AGE-SECRET-KEY-1NOTFORTHESERVER"), 0o600); err != nil {
		t.Fatal(err)
	}
	plan, why := planLoad("`t`", []engine.Column{{Name: "id", Type: "int"}, {Name: "v", Type: "varchar"}})
	if plan == nil {
		t.Fatal(why)
	}
	load := func(f *fakeServer) error {
		my := &engine.MySQL{Conn: engine.Conn{Host: "127.0.0.1", Port: f.port(), User: "u", Password: "pw", Database: "db"}}
		l := &loader{my: my, plans: map[string]*loadPlan{"`t`": plan}}
		c := loaddata.New(bufio.NewReader(strings.NewReader("(1,'a'),(2,'b');\n")), plan.header, plan.hex)
		return l.load(context.Background(), "`t`", nil, plan, c)
	}

	// Honest: the server asks for the reader the statement names and gets
	// the rows (the fake server works).
	honest := startFake(t, func(reader string) string { return "Reader::" + reader })
	err := load(honest)
	if got := <-honest.got; string(got) != "1\ta\n2\tb\n" {
		t.Fatalf("the honest server got %q (load: %v)", got, err)
	}
	// The fake server stores nothing: the check before the COMMIT refuses.
	if !strings.Contains(strings.TrimSpace(<-honest.loads), "LOAD DATA LOCAL INFILE 'Reader::cairn-load-") {
		t.Error("the statement does not name a registered reader")
	}

	// Hostile: it asks for the secret's path; the driver refuses and sends
	// nothing of it.
	for _, name := range []string{secret, "/etc/hostname", "Reader::not-this-load"} {
		hostile := startFake(t, func(string) string { return name })
		err := load(hostile)
		<-hostile.loads
		select {
		case got := <-hostile.got:
			if len(got) != 0 {
				t.Errorf("asked for %s, the server got %d bytes: %q", name, len(got), got)
			}
		case err := <-hostile.failed:
			t.Errorf("asked for %s: %v", name, err)
		}
		if err == nil || !strings.Contains(err.Error(), "not registered") {
			t.Errorf("asked for %s: the load returned %v, want the driver's refusal", name, err)
		}
	}
}
