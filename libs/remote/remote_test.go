package remote_test

import (
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	"cairn.dev/libs/internal/testtype"
	"cairn.dev/libs/remote"
	"cairn.dev/libs/testing/testenv"
)

// local runs the operator and holds the kubeconfig Secrets; target is the
// other cluster.
var local, target *testenv.Env

func TestMain(m *testing.M) {
	testenv.MainFunc(m, func() (func(), error) {
		var err error
		if local, err = testenv.Start(testenv.Options{Scheme: testtype.Scheme()}); err != nil {
			return nil, err
		}
		if target, err = testenv.Start(testenv.Options{Scheme: testtype.Scheme(), CRDDirectoryPaths: []string{testtype.CRDDir()}}); err != nil {
			_ = local.Stop()
			return nil, err
		}
		return func() { _ = target.Stop(); _ = local.Stop() }, nil
	})
}

func clients() *remote.Clients {
	return &remote.Clients{Metadata: local.Client, Secrets: local.Client, Scheme: testtype.Scheme(), Timeout: 5 * time.Second}
}

func secret(t *testing.T, ns, name string, data map[string][]byte) *corev1.Secret {
	t.Helper()
	s := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}, Data: data}
	if err := local.Client.Create(context.Background(), s); err != nil {
		t.Fatal(err)
	}
	return s
}

func kubeconfig(t *testing.T, cfg *rest.Config) []byte {
	t.Helper()
	kc, err := testenv.Kubeconfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return kc
}

func TestClientFromASecretReachesTheOtherCluster(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	ns, err := local.Namespace(ctx, "remote")
	g.Expect(err).NotTo(HaveOccurred())
	s := secret(t, ns, "target-kubeconfig", map[string][]byte{remote.DefaultKey: kubeconfig(t, target.Config)})
	cs := clients()

	c, err := cs.Get(ctx, remote.SecretRef{Namespace: ns, Name: s.Name})
	g.Expect(err).NotTo(HaveOccurred())

	// It writes and reads in the target cluster, not the local one — a
	// custom kind from the caller's scheme, installed only in the target.
	tns, err := target.Namespace(ctx, "migrated")
	g.Expect(err).NotTo(HaveOccurred())
	w := &testtype.Widget{ObjectMeta: metav1.ObjectMeta{Namespace: tns, Name: "w"}, Spec: testtype.WidgetSpec{Size: 5}}
	g.Expect(c.Create(ctx, w)).To(Succeed())
	got := &testtype.Widget{}
	g.Expect(target.Client.Get(ctx, client.ObjectKeyFromObject(w), got)).To(Succeed())
	g.Expect(got.Spec.Size).To(Equal(int32(5)))
	g.Expect(c.Get(ctx, client.ObjectKeyFromObject(w), got)).To(Succeed())
	err = local.Client.Get(ctx, client.ObjectKey{Name: tns}, &corev1.Namespace{})
	g.Expect(err).To(HaveOccurred(), "the namespace made in the target exists in the local cluster")

	// Cache hit: the same client.
	again, err := cs.Get(ctx, remote.SecretRef{Namespace: ns, Name: s.Name, Key: remote.DefaultKey})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(again).To(BeIdenticalTo(c))
	g.Expect(cs.Len()).To(Equal(1))

	// The Secret changes (a new resourceVersion): a new client; the old one is dropped.
	s.Labels = map[string]string{"rotated": "1"}
	g.Expect(local.Client.Update(ctx, s)).To(Succeed())
	rotated, err := cs.Get(ctx, remote.SecretRef{Namespace: ns, Name: s.Name})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(rotated).NotTo(BeIdenticalTo(c))
	g.Expect(cs.Len()).To(Equal(1))
	g.Expect(rotated.Get(ctx, client.ObjectKeyFromObject(w), got)).To(Succeed())
	hit, err := cs.Get(ctx, remote.SecretRef{Namespace: ns, Name: s.Name})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(hit).To(BeIdenticalTo(rotated))

	// Replaced by a new Secret of the same name (a new UID): a new client.
	g.Expect(local.Client.Delete(ctx, s)).To(Succeed())
	secret(t, ns, s.Name, map[string][]byte{remote.DefaultKey: kubeconfig(t, target.Config)})
	replaced, err := cs.Get(ctx, remote.SecretRef{Namespace: ns, Name: s.Name})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(replaced).NotTo(BeIdenticalTo(rotated))

	cs.Forget(remote.SecretRef{Namespace: ns, Name: s.Name})
	g.Expect(cs.Len()).To(BeZero())
}

// A user bound to nothing in the target cluster: the client is built, and
// the target's RBAC decides what it may do.
func TestClientActsAsTheKubeconfigUser(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	ns, err := local.Namespace(ctx, "remote")
	g.Expect(err).NotTo(HaveOccurred())
	nobody, err := target.AddUser("nobody")
	g.Expect(err).NotTo(HaveOccurred())
	secret(t, ns, "nobody", map[string][]byte{"config": kubeconfig(t, nobody)})
	c, err := clients().Get(ctx, remote.SecretRef{Namespace: ns, Name: "nobody", Key: "config"})
	g.Expect(err).NotTo(HaveOccurred())
	err = c.List(ctx, &corev1.NamespaceList{})
	g.Expect(err).To(HaveOccurred())
	g.Expect(err.Error()).To(ContainSubstring(`"nobody" cannot list`))
}

func TestErrorsSayWhatIsWrong(t *testing.T) {
	ctx := context.Background()
	ns, err := local.Namespace(ctx, "remote")
	if err != nil {
		t.Fatal(err)
	}
	good := kubeconfig(t, target.Config)
	withExec := mutateKubeconfig(t, good, `    client-certificate-data`, "    exec:\n      apiVersion: client.authentication.k8s.io/v1\n      command: /bin/sh\n      interactiveMode: Never\n    client-certificate-data")
	withTokenFile := mutateKubeconfig(t, good, `    client-certificate-data`, "    tokenFile: /var/run/secrets/kubernetes.io/serviceaccount/token\n    client-certificate-data")
	badToken := kubeconfig(t, &rest.Config{Host: target.Config.Host, TLSClientConfig: rest.TLSClientConfig{CAData: target.Config.CAData}, BearerToken: "not-a-token"})

	// A closed port, and a port that accepts and never answers.
	closed := freeAddr(t)
	blackHole := blackHoleAddr(t)

	secret(t, ns, "no-key", map[string][]byte{"other": good})
	secret(t, ns, "empty", map[string][]byte{remote.DefaultKey: {}})
	secret(t, ns, "garbage", map[string][]byte{remote.DefaultKey: []byte("this is: [not a kubeconfig")})
	secret(t, ns, "exec", map[string][]byte{remote.DefaultKey: withExec})
	secret(t, ns, "token-file", map[string][]byte{remote.DefaultKey: withTokenFile})
	secret(t, ns, "bad-token", map[string][]byte{remote.DefaultKey: badToken})
	secret(t, ns, "closed", map[string][]byte{remote.DefaultKey: kubeconfig(t, &rest.Config{Host: "https://" + closed, TLSClientConfig: rest.TLSClientConfig{Insecure: true}, BearerToken: "x"})})
	secret(t, ns, "black-hole", map[string][]byte{remote.DefaultKey: kubeconfig(t, &rest.Config{Host: "https://" + blackHole, TLSClientConfig: rest.TLSClientConfig{Insecure: true}, BearerToken: "x"})})

	cases := []struct {
		secret, key string
		reason      string
		sentinel    error
		message     string
	}{
		{"missing", "", remote.SecretNotFoundReason, remote.ErrSecretNotFound, "not found"},
		{"no-key", "", remote.KeyMissingReason, remote.ErrKeyMissing, `no key "kubeconfig"`},
		{"no-key", "custom", remote.KeyMissingReason, remote.ErrKeyMissing, `no key "custom"`},
		{"empty", "", remote.KeyMissingReason, remote.ErrKeyMissing, "empty"},
		{"garbage", "", remote.InvalidReason, remote.ErrInvalid, "kubeconfig"},
		{"exec", "", remote.InvalidReason, remote.ErrInvalid, "exec credential plugins are not allowed"},
		{"token-file", "", remote.InvalidReason, remote.ErrInvalid, "tokenFile is a file path"},
		{"bad-token", "", remote.UnauthorizedReason, remote.ErrUnauthorized, "refused the credentials"},
		{"closed", "", remote.UnreachableReason, remote.ErrUnreachable, "unreachable"},
		// Returns only because the client's own timeout (5s) ends the request.
		{"black-hole", "", remote.UnreachableReason, remote.ErrUnreachable, "unreachable"},
	}
	cs := clients()
	for _, c := range cases {
		t.Run(c.secret+"/"+c.key, func(t *testing.T) {
			_, err := cs.Get(ctx, remote.SecretRef{Namespace: ns, Name: c.secret, Key: c.key})
			var re *remote.Error
			if !errors.As(err, &re) {
				t.Fatalf("error %v (%T), want *remote.Error", err, err)
			}
			if re.Reason != c.reason || !errors.Is(err, c.sentinel) || !strings.Contains(err.Error(), c.message) {
				t.Fatalf("error %s %q, want %s containing %q", re.Reason, err, c.reason, c.message)
			}
			if re.Retryable() != (c.reason == remote.UnreachableReason) {
				t.Fatalf("Retryable() = %v for %s", re.Retryable(), re.Reason)
			}
		})
	}
	if cs.Len() != 0 {
		t.Fatalf("%d clients cached after failures, want 0", cs.Len())
	}
}

func mutateKubeconfig(t *testing.T, kc []byte, old, new string) []byte {
	t.Helper()
	s := string(kc)
	if !strings.Contains(s, old) {
		t.Fatalf("kubeconfig has no %q:\n%s", old, s)
	}
	out := []byte(strings.Replace(s, old, new, 1))
	if _, err := clientcmd.Load(out); err != nil {
		t.Fatalf("mutated kubeconfig does not parse: %v", err)
	}
	return out
}

func freeAddr(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	_ = l.Close()
	return addr
}

// blackHoleAddr accepts connections and never writes a byte.
func blackHoleAddr(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var conns []net.Conn
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			conns = append(conns, c)
			mu.Unlock()
		}
	}()
	t.Cleanup(func() {
		_ = l.Close()
		mu.Lock()
		defer mu.Unlock()
		for _, c := range conns {
			_ = c.Close()
		}
	})
	return l.Addr().String()
}

// Wired as recommended — the Secret's metadata from the manager's cache, its
// data past the cache — the operator never lists or watches whole Secrets,
// and a cache hit reads no Secret at all from the API server.
func TestWithAManagerCacheNoSecretDataIsCached(t *testing.T) {
	g := NewWithT(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	ns, err := local.Namespace(ctx, "remote")
	g.Expect(err).NotTo(HaveOccurred())
	secret(t, ns, "target", map[string][]byte{remote.DefaultKey: kubeconfig(t, target.Config)})

	var fullSecretLists, fullSecretGets, metaSecretReads atomic.Int64
	cfg := rest.CopyConfig(local.Config)
	cfg.WrapTransport = func(rt http.RoundTripper) http.RoundTripper {
		return roundTripFunc(func(r *http.Request) (*http.Response, error) {
			if r.Method == http.MethodGet && strings.Contains(r.URL.Path, "/secrets") {
				switch {
				case strings.Contains(r.Header.Get("Accept"), "as=PartialObjectMetadata"):
					metaSecretReads.Add(1)
				case strings.HasSuffix(r.URL.Path, "/secrets"):
					fullSecretLists.Add(1)
				default:
					fullSecretGets.Add(1)
				}
			}
			return rt.RoundTrip(r)
		})
	}
	mgr, err := ctrl.NewManager(cfg, ctrl.Options{Scheme: local.Scheme, Metrics: metricsserver.Options{BindAddress: "0"}})
	g.Expect(err).NotTo(HaveOccurred())
	go func() { _ = mgr.Start(ctx) }()
	g.Expect(mgr.GetCache().WaitForCacheSync(ctx)).To(BeTrue())
	cs := &remote.Clients{Metadata: mgr.GetClient(), Secrets: mgr.GetAPIReader(), Scheme: testtype.Scheme()}

	first, err := cs.Get(ctx, remote.SecretRef{Namespace: ns, Name: "target"})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(fullSecretGets.Load()).To(Equal(int64(1)))
	for range 5 {
		c, err := cs.Get(ctx, remote.SecretRef{Namespace: ns, Name: "target"})
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(c).To(BeIdenticalTo(first))
	}
	g.Expect(fullSecretGets.Load()).To(Equal(int64(1)), "a cache hit read the Secret's data")
	g.Expect(fullSecretLists.Load()).To(BeZero(), "whole Secrets were listed or watched: their data would be cached")
	g.Expect(metaSecretReads.Load()).To(BeNumerically(">", 0))
}

type roundTripFunc func(*http.Request) (*http.Response, error)

func (f roundTripFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

// proxy forwards TCP connections to target until closed (then refuses them
// and cuts the open ones): a remote cluster that goes away.
type proxy struct {
	l     net.Listener
	mu    sync.Mutex
	conns []net.Conn
}

func startProxy(t *testing.T, target string) *proxy {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &proxy{l: l}
	go func() {
		for {
			in, err := l.Accept()
			if err != nil {
				return
			}
			out, err := net.Dial("tcp", target)
			if err != nil {
				_ = in.Close()
				continue
			}
			p.mu.Lock()
			p.conns = append(p.conns, in, out)
			p.mu.Unlock()
			go func() { _, _ = io.Copy(out, in); _ = out.Close() }()
			go func() { _, _ = io.Copy(in, out); _ = in.Close() }()
		}
	}()
	t.Cleanup(p.close)
	return p
}

func (p *proxy) close() {
	_ = p.l.Close()
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, c := range p.conns {
		_ = c.Close()
	}
}

// A cached client whose cluster went away: Classify turns the request's
// error into RemoteClusterUnreachable; other errors pass as they are.
func TestClassifyErrorsOfACachedClient(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	ns, err := local.Namespace(ctx, "remote")
	g.Expect(err).NotTo(HaveOccurred())
	u, err := url.Parse(target.Config.Host)
	g.Expect(err).NotTo(HaveOccurred())
	p := startProxy(t, u.Host)
	viaProxy := rest.CopyConfig(target.Config)
	viaProxy.Host = "https://" + p.l.Addr().String()
	ref := remote.SecretRef{Namespace: ns, Name: "via-proxy"}
	secret(t, ns, ref.Name, map[string][]byte{remote.DefaultKey: kubeconfig(t, viaProxy)})
	c, err := clients().Get(ctx, ref)
	g.Expect(err).NotTo(HaveOccurred())

	err = c.Get(ctx, client.ObjectKey{Namespace: "default", Name: "no-such-widget"}, &testtype.Widget{})
	g.Expect(err).To(HaveOccurred())
	g.Expect(remote.Classify(ref, err)).To(BeIdenticalTo(err), "NotFound is not the cluster's fault")
	g.Expect(remote.Classify(ref, nil)).To(Succeed())

	p.close()
	err = c.List(ctx, &testtype.WidgetList{})
	g.Expect(err).To(HaveOccurred())
	classified := remote.Classify(ref, err)
	var re *remote.Error
	g.Expect(errors.As(classified, &re)).To(BeTrue(), "%v (%T)", err, err)
	g.Expect(re.Reason).To(Equal(remote.UnreachableReason))
	g.Expect(errors.Is(classified, remote.ErrUnreachable)).To(BeTrue())
	g.Expect(classified.Error()).To(ContainSubstring("via-proxy"))
	g.Expect(remote.Classify(ref, classified)).To(BeIdenticalTo(classified))
}
