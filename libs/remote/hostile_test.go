package remote_test

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"k8s.io/client-go/rest"

	"cairn.dev/libs/remote"
)

// TestHostileKubeconfigsAreRefused: a server that is not https, a proxy,
// exec plugins and file paths are refused before any request is sent —
// by Get and by Validate (the migration webhook's check).
func TestHostileKubeconfigsAreRefused(t *testing.T) {
	ctx := context.Background()
	ns, err := local.Namespace(ctx, "hostile")
	if err != nil {
		t.Fatal(err)
	}
	var hits atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { hits.Add(1) }))
	t.Cleanup(srv.Close)
	good := kubeconfig(t, target.Config)
	plainHTTP := kubeconfig(t, &rest.Config{Host: srv.URL, BearerToken: "x"})
	withProxy := mutateKubeconfig(t, good, "    server:", "    proxy-url: "+srv.URL+"\n    server:")
	cases := map[string]struct {
		data []byte
		want string
	}{
		"http":  {plainHTTP, "server must be an https:// URL"},
		"proxy": {withProxy, "proxy-url is not allowed"},
	}
	cs := clients()
	for name, c := range cases {
		t.Run(name, func(t *testing.T) {
			if err := remote.Validate(c.data); err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("Validate: %v, want %q", err, c.want)
			}
			secret(t, ns, name, map[string][]byte{remote.DefaultKey: c.data})
			_, err := cs.Get(ctx, remote.SecretRef{Namespace: ns, Name: name})
			var re *remote.Error
			if !errors.As(err, &re) || re.Reason != remote.InvalidReason || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("Get: %v, want %s with %q", err, remote.InvalidReason, c.want)
			}
		})
	}
	if err := remote.Validate(good); err != nil {
		t.Fatalf("Validate of a good kubeconfig: %v", err)
	}
	if n := hits.Load(); n != 0 {
		t.Fatalf("%d requests reached the plain-HTTP server or the proxy", n)
	}
}

// TestRepliesAreBoundedAndNotCopiedIntoMessages: a server answering with a
// body larger than MaxResponseBytes fails the request, and the error (a
// condition message) keeps at most a short, printable excerpt of it.
func TestRepliesAreBoundedAndNotCopiedIntoMessages(t *testing.T) {
	ctx := context.Background()
	ns, err := local.Namespace(ctx, "bounded")
	if err != nil {
		t.Fatal(err)
	}
	body := strings.Repeat("LEAK\x1b[31m", 1<<17) // ~1 MiB with terminal escapes
	for name, h := range map[string]http.HandlerFunc{
		// Content-Length says it all.
		"sized": func(w http.ResponseWriter, _ *http.Request) {
			w.Header().Set("Content-Type", "application/json")
			_, _ = w.Write([]byte(body))
		},
		// Chunked: only reading tells.
		"chunked": func(w http.ResponseWriter, _ *http.Request) {
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusInternalServerError)
			for i := 0; i < 64; i++ {
				_, _ = w.Write([]byte(body[:16<<10]))
				w.(http.Flusher).Flush()
			}
		},
	} {
		t.Run(name, func(t *testing.T) {
			srv := httptest.NewTLSServer(h)
			t.Cleanup(srv.Close)
			secret(t, ns, name, map[string][]byte{remote.DefaultKey: kubeconfig(t, &rest.Config{Host: srv.URL,
				TLSClientConfig: rest.TLSClientConfig{Insecure: true}, BearerToken: "x"})})
			cs := clients()
			cs.MaxResponseBytes = 64 << 10
			_, err := cs.Get(ctx, remote.SecretRef{Namespace: ns, Name: name})
			if err == nil {
				t.Fatal("a 1 MiB reply was accepted")
			}
			msg := err.Error()
			if strings.Count(msg, "LEAK") > 40 || strings.ContainsAny(msg, "\x1b") || len(msg) > 600 {
				t.Fatalf("the message copies the reply (%d bytes): %q", len(msg), msg)
			}
		})
	}
}

// TestIdleClientsAreForgotten: a client not asked for during IdleTimeout
// is dropped at the next Get (its Secret no longer used by any running
// MigrationJob); one still used stays.
func TestIdleClientsAreForgotten(t *testing.T) {
	ctx := context.Background()
	ns, err := local.Namespace(ctx, "idle")
	if err != nil {
		t.Fatal(err)
	}
	kc := kubeconfig(t, target.Config)
	secret(t, ns, "a", map[string][]byte{remote.DefaultKey: kc})
	secret(t, ns, "b", map[string][]byte{remote.DefaultKey: kc})
	now := time.Now()
	cs := clients()
	cs.IdleTimeout = time.Minute
	cs.Now = func() time.Time { return now }
	for _, n := range []string{"a", "b"} {
		if _, err := cs.Get(ctx, remote.SecretRef{Namespace: ns, Name: n}); err != nil {
			t.Fatal(err)
		}
	}
	if cs.Len() != 2 {
		t.Fatalf("%d clients cached, want 2", cs.Len())
	}
	now = now.Add(50 * time.Second)
	if _, err := cs.Get(ctx, remote.SecretRef{Namespace: ns, Name: "b"}); err != nil { // b in use
		t.Fatal(err)
	}
	now = now.Add(50 * time.Second) // a idle 100s, b 50s
	if _, err := cs.Get(ctx, remote.SecretRef{Namespace: ns, Name: "b"}); err != nil {
		t.Fatal(err)
	}
	if cs.Len() != 1 {
		t.Fatalf("%d clients cached after a's idle timeout, want 1 (b)", cs.Len())
	}
}
