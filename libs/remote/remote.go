// Package remote gives a controller a client for another cluster, built from
// a kubeconfig kept in a Secret of its own cluster (a `…KubeconfigSecretRef`).
// Clients are cached per Secret: the same Secret (same UID and
// resourceVersion) gives the same client; a changed or replaced Secret builds
// a new one and the old one is dropped. Each client has its own request
// timeout and rate limits, so a slow or unreachable remote cluster cannot
// stall the operator's work on its own cluster.
//
// Every failure is an *Error whose Reason is ready for a status condition:
// the Secret is missing, has no such key, holds an invalid or unsafe
// kubeconfig, or the cluster cannot be reached or refuses the credentials.
package remote

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// DefaultKey is the Secret key holding the kubeconfig when SecretRef.Key is empty.
const DefaultKey = "kubeconfig"

// Defaults of the client's own limits.
const (
	DefaultTimeout = 30 * time.Second
	DefaultQPS     = 20
	DefaultBurst   = 30
	// DefaultMaxResponseBytes bounds one reply body from a remote cluster:
	// a hostile or broken server cannot make the operator read (and hold)
	// more.
	DefaultMaxResponseBytes = 16 << 20
	// DefaultIdleTimeout: a cached client unused this long is dropped (its
	// Secret is no longer used by any running MigrationJob).
	DefaultIdleTimeout = 15 * time.Minute
)

// SecretRef names the Secret (in the local cluster) holding a kubeconfig.
type SecretRef struct {
	Namespace string
	Name      string
	// Key in the Secret's data; empty means DefaultKey.
	Key string
}

func (r SecretRef) key() string {
	if r.Key == "" {
		return DefaultKey
	}
	return r.Key
}

func (r SecretRef) String() string {
	return fmt.Sprintf("Secret %s/%s key %q", r.Namespace, r.Name, r.key())
}

// Clients builds and caches clients for remote clusters. The zero value is
// not usable: set Metadata, Secrets and Scheme. Safe for concurrent use.
type Clients struct {
	// Metadata reads the Secret's metadata (UID, resourceVersion) on every
	// Get; use mgr.GetClient(): it reads from a metadata-only cache, so no
	// Secret's data is ever cached.
	Metadata client.Reader
	// Secrets reads the Secret with its data, only when the cache has no
	// client for that UID and resourceVersion; use mgr.GetAPIReader().
	Secrets client.Reader
	// Scheme knows the kinds the remote clients read and write.
	Scheme *runtime.Scheme
	// Timeout bounds every request to a remote cluster; 0 means DefaultTimeout.
	Timeout time.Duration
	// QPS and Burst limit requests to each remote cluster; 0 means the defaults.
	QPS   float32
	Burst int
	// MaxResponseBytes bounds every reply body; 0 means
	// DefaultMaxResponseBytes. A longer reply fails the request.
	MaxResponseBytes int64
	// IdleTimeout drops a cached client not returned by Get for this long
	// (checked on every Get); 0 means DefaultIdleTimeout.
	IdleTimeout time.Duration
	// Now is the clock; nil means time.Now.
	Now func() time.Time

	mu      sync.Mutex
	entries map[SecretRef]*entry
}

type entry struct {
	uid             types.UID
	resourceVersion string
	client          client.Client
	http            *http.Client
	lastUsed        time.Time
}

func (c *Clients) now() time.Time {
	if c.Now != nil {
		return c.Now()
	}
	return time.Now()
}

// evictIdle drops the entries unused for IdleTimeout; c.mu is held.
func (c *Clients) evictIdle(now time.Time) {
	idle := c.IdleTimeout
	if idle <= 0 {
		idle = DefaultIdleTimeout
	}
	for k, e := range c.entries {
		if now.Sub(e.lastUsed) > idle {
			e.http.CloseIdleConnections()
			delete(c.entries, k)
		}
	}
}

// Get returns a client for the cluster the kubeconfig in ref describes,
// checked to reach it and to be accepted by it when it is built. A cache hit
// costs one metadata read of the Secret (from the cache) and nothing more.
func (c *Clients) Get(ctx context.Context, ref SecretRef) (client.Client, error) {
	key := SecretRef{Namespace: ref.Namespace, Name: ref.Name, Key: ref.key()}
	nn := types.NamespacedName{Namespace: ref.Namespace, Name: ref.Name}
	meta := &metav1.PartialObjectMetadata{}
	meta.SetGroupVersionKind(corev1.SchemeGroupVersion.WithKind("Secret"))
	if err := c.Metadata.Get(ctx, nn, meta); err != nil {
		return nil, c.secretError(key, err)
	}
	now := c.now()
	c.mu.Lock()
	c.evictIdle(now)
	e := c.entries[key]
	if e != nil && e.uid == meta.UID && e.resourceVersion == meta.ResourceVersion {
		e.lastUsed = now
		c.mu.Unlock()
		return e.client, nil
	}
	c.mu.Unlock()

	secret := &corev1.Secret{}
	if err := c.Secrets.Get(ctx, nn, secret); err != nil {
		return nil, c.secretError(key, err)
	}
	data, ok := secret.Data[key.Key]
	if !ok || len(data) == 0 {
		return nil, &Error{Reason: KeyMissingReason, Ref: key, Err: ErrKeyMissing,
			Message: fmt.Sprintf("%s has no key %q (or it is empty)", key.Name, key.Key)}
	}
	cfg, err := c.restConfig(data)
	if err != nil {
		return nil, &Error{Reason: InvalidReason, Ref: key, Err: errors.Join(ErrInvalid, err),
			Message: fmt.Sprintf("the kubeconfig in %s: %v", key, err)}
	}
	hc, err := rest.HTTPClientFor(cfg)
	if err != nil {
		return nil, &Error{Reason: InvalidReason, Ref: key, Err: errors.Join(ErrInvalid, err),
			Message: fmt.Sprintf("the kubeconfig in %s: %v", key, err)}
	}
	if err := probe(ctx, cfg, hc); err != nil {
		hc.CloseIdleConnections()
		return nil, classify(key, cfg.Host, err)
	}
	cl, err := client.New(cfg, client.Options{Scheme: c.Scheme, HTTPClient: hc})
	if err != nil {
		hc.CloseIdleConnections()
		return nil, &Error{Reason: UnreachableReason, Ref: key, Err: errors.Join(ErrUnreachable, err),
			Message: fmt.Sprintf("building a client for %s (from %s): %v", cfg.Host, key, err)}
	}

	c.mu.Lock()
	defer c.mu.Unlock()
	if c.entries == nil {
		c.entries = map[SecretRef]*entry{}
	}
	if old := c.entries[key]; old != nil {
		old.http.CloseIdleConnections()
	}
	c.entries[key] = &entry{uid: secret.UID, resourceVersion: secret.ResourceVersion, client: cl, http: hc, lastUsed: c.now()}
	return cl, nil
}

// Forget drops the cached client for ref (e.g. when its owner is deleted).
func (c *Clients) Forget(ref SecretRef) {
	key := SecretRef{Namespace: ref.Namespace, Name: ref.Name, Key: ref.key()}
	c.mu.Lock()
	defer c.mu.Unlock()
	if e := c.entries[key]; e != nil {
		e.http.CloseIdleConnections()
		delete(c.entries, key)
	}
}

// Len is the number of cached clients.
func (c *Clients) Len() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.entries)
}

func (c *Clients) secretError(ref SecretRef, err error) error {
	if apierrors.IsNotFound(err) {
		return &Error{Reason: SecretNotFoundReason, Ref: ref, Err: errors.Join(ErrSecretNotFound, err),
			Message: fmt.Sprintf("Secret %s/%s with the kubeconfig not found", ref.Namespace, ref.Name)}
	}
	return fmt.Errorf("remote: reading %s: %w", ref, err) // the local API server: transient
}

// Validate parses a kubeconfig and refuses what the operator would refuse
// to use (see restConfig): the migration webhook calls it so such a
// kubeconfig is refused at admission.
func Validate(data []byte) error {
	_, err := load(data)
	return err
}

func load(data []byte) (*rest.Config, error) {
	kc, err := clientcmd.Load(data)
	if err != nil {
		return nil, err
	}
	if err := safe(kc); err != nil {
		return nil, err
	}
	cfg, err := clientcmd.NewDefaultClientConfig(*kc, &clientcmd.ConfigOverrides{}).ClientConfig()
	if err != nil {
		return nil, err
	}
	if cfg.Proxy != nil {
		return nil, errors.New("proxy-url is not allowed: the operator connects to the server directly")
	}
	u, err := url.Parse(cfg.Host)
	if err != nil || u.Scheme != "https" || u.Host == "" {
		return nil, errors.New("server must be an https:// URL (the credentials and the cluster's replies must travel encrypted)")
	}
	return cfg, nil
}

// restConfig parses a kubeconfig, refusing what would make the operator run
// a program or read its own files (exec plugins, auth providers, file
// paths) — whoever can write the Secret must not gain the operator's
// identity or its process — and a server that is not https or is reached
// through a proxy. Every reply body is bounded (MaxResponseBytes).
func (c *Clients) restConfig(data []byte) (*rest.Config, error) {
	cfg, err := load(data)
	if err != nil {
		return nil, err
	}
	limit := c.MaxResponseBytes
	if limit <= 0 {
		limit = DefaultMaxResponseBytes
	}
	cfg.Wrap(func(rt http.RoundTripper) http.RoundTripper { return &boundedTransport{next: rt, limit: limit} })
	cfg.Timeout = c.Timeout
	if cfg.Timeout <= 0 {
		cfg.Timeout = DefaultTimeout
	}
	cfg.QPS, cfg.Burst = c.QPS, c.Burst
	if cfg.QPS <= 0 {
		cfg.QPS = DefaultQPS
	}
	if cfg.Burst <= 0 {
		cfg.Burst = DefaultBurst
	}
	cfg.UserAgent = "cairn-operator (remote)"
	return cfg, nil
}

func safe(kc *clientcmdapi.Config) error {
	ctxName := kc.CurrentContext
	kctx, ok := kc.Contexts[ctxName]
	if !ok {
		return fmt.Errorf("current context %q not found", ctxName)
	}
	if cl, ok := kc.Clusters[kctx.Cluster]; ok {
		switch {
		case cl.CertificateAuthority != "":
			return errors.New("certificate-authority is a file path; embed it as certificate-authority-data")
		case cl.ProxyURL != "":
			return errors.New("proxy-url is not allowed: the operator connects to the server directly")
		}
	}
	au, ok := kc.AuthInfos[kctx.AuthInfo]
	if !ok {
		return nil
	}
	switch {
	case au.Exec != nil:
		return errors.New("exec credential plugins are not allowed; use a token or client certificate data")
	case au.AuthProvider != nil:
		return errors.New("auth providers are not allowed; use a token or client certificate data")
	case au.TokenFile != "":
		return errors.New("tokenFile is a file path; embed the token")
	case au.ClientCertificate != "" || au.ClientKey != "":
		return errors.New("client-certificate and client-key are file paths; embed them as client-certificate-data and client-key-data")
	}
	return nil
}

// probe asks the remote cluster for its API versions: an authenticated
// request (anonymous users may not), so a bad credential shows here.
func probe(ctx context.Context, cfg *rest.Config, hc *http.Client) error {
	rc, err := rest.UnversionedRESTClientForConfigAndClient(withDefaults(cfg), hc)
	if err != nil {
		return err
	}
	return rc.Get().AbsPath("/api").Do(ctx).Error()
}

func withDefaults(cfg *rest.Config) *rest.Config {
	c := rest.CopyConfig(cfg)
	if c.NegotiatedSerializer == nil {
		c.NegotiatedSerializer = clientgoscheme.Codecs.WithoutConversion()
	}
	return c
}

// boundedTransport fails a reply whose body is longer than limit bytes.
type boundedTransport struct {
	next  http.RoundTripper
	limit int64
}

func (t *boundedTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	resp, err := t.next.RoundTrip(req)
	if err != nil || resp.Body == nil {
		return resp, err
	}
	if resp.ContentLength > t.limit {
		_ = resp.Body.Close()
		return nil, fmt.Errorf("%w: the reply has %d bytes, more than %d", ErrResponseTooLarge, resp.ContentLength, t.limit)
	}
	resp.Body = &boundedBody{rc: resp.Body, left: t.limit}
	return resp, nil
}

// ErrResponseTooLarge: a remote cluster's reply was longer than
// Clients.MaxResponseBytes.
var ErrResponseTooLarge = errors.New("remote cluster reply too large")

type boundedBody struct {
	rc   io.ReadCloser
	left int64
}

func (b *boundedBody) Read(p []byte) (int, error) {
	if b.left <= 0 {
		// One byte more than allowed tells a body of exactly the limit
		// from a longer one.
		var one [1]byte
		if n, _ := b.rc.Read(one[:]); n > 0 {
			return 0, ErrResponseTooLarge
		}
		return 0, io.EOF
	}
	if int64(len(p)) > b.left {
		p = p[:b.left]
	}
	n, err := b.rc.Read(p)
	b.left -= int64(n)
	return n, err
}

func (b *boundedBody) Close() error { return b.rc.Close() }
