package install

import (
	"fmt"
	"io"
	"net"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"cairn.dev/agent/testservers"
)

// Service stands in for an operator's webhook Service: one address
// (https://127.0.0.1:Port) that the webhook configurations call, with the
// operator's serving certificates. In proxy mode it forwards each connection
// (TLS passes through) to one of the operator's ready processes, round robin,
// skipping those that refuse — as kube-proxy does for a Service's ready
// endpoints — so replicas can come and go. Without a proxy (the demo, whose
// processes outlive the program that started them) the one process listens on
// Port itself.
type Service struct {
	Operator string
	Port     int
	Certs    *Certs

	l        net.Listener
	mu       sync.Mutex
	backends []int
	next     atomic.Uint64
}

// NewService allocates the Service's port and certificates (in certDir);
// with proxy it starts listening.
func NewService(operator, certDir string, proxy bool) (*Service, error) {
	certs, err := NewCerts(certDir)
	if err != nil {
		return nil, err
	}
	s := &Service{Operator: operator, Certs: certs}
	if !proxy {
		if s.Port, err = testservers.FreePort(); err != nil {
			return nil, err
		}
		return s, nil
	}
	if s.l, err = net.Listen("tcp", "127.0.0.1:0"); err != nil {
		return nil, err
	}
	s.Port = s.l.Addr().(*net.TCPAddr).Port
	go s.serve()
	return s, nil
}

// URL of path on the Service.
func (s *Service) URL(path string) string {
	return fmt.Sprintf("https://127.0.0.1:%d/%s", s.Port, strings.TrimPrefix(path, "/"))
}

// Proxy says whether connections are forwarded to backends.
func (s *Service) Proxy() bool { return s.l != nil }

// AddBackend makes a ready process's webhook port an endpoint.
func (s *Service) AddBackend(port int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.backends = append(s.backends, port)
}

// RemoveBackend drops an endpoint (its process stopped).
func (s *Service) RemoveBackend(port int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.backends = slices.DeleteFunc(s.backends, func(p int) bool { return p == port })
}

// Close stops listening.
func (s *Service) Close() error {
	if s.l == nil {
		return nil
	}
	return s.l.Close()
}

func (s *Service) serve() {
	for {
		conn, err := s.l.Accept()
		if err != nil {
			return
		}
		go s.forward(conn)
	}
}

func (s *Service) forward(in net.Conn) {
	defer in.Close()
	s.mu.Lock()
	backends := slices.Clone(s.backends)
	s.mu.Unlock()
	if len(backends) == 0 {
		return
	}
	start := int(s.next.Add(1))
	for i := range backends {
		port := backends[(start+i)%len(backends)]
		out, err := net.DialTimeout("tcp", fmt.Sprintf("127.0.0.1:%d", port), 2*time.Second)
		if err != nil {
			continue
		}
		defer out.Close()
		done := make(chan struct{}, 2)
		go func() { _, _ = io.Copy(out, in); closeWrite(out); done <- struct{}{} }()
		go func() { _, _ = io.Copy(in, out); closeWrite(in); done <- struct{}{} }()
		<-done
		<-done
		return
	}
}

func closeWrite(c net.Conn) {
	if tc, ok := c.(*net.TCPConn); ok {
		_ = tc.CloseWrite()
	}
}
