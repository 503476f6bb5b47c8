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
	"net/http"
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

	mu      sync.Mutex
	entries map[SecretRef]*entry
}

type entry struct {
	uid             types.UID
	resourceVersion string
	client          client.Client
	http            *http.Client
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
	c.mu.Lock()
	e := c.entries[key]
	c.mu.Unlock()
	if e != nil && e.uid == meta.UID && e.resourceVersion == meta.ResourceVersion {
		return e.client, nil
	}

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
	c.entries[key] = &entry{uid: secret.UID, resourceVersion: secret.ResourceVersion, client: cl, http: hc}
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

// restConfig parses a kubeconfig, refusing what would make the operator run
// a program or read its own files (exec plugins, auth providers, file
// paths): whoever can write the Secret must not gain the operator's
// identity or its process.
func (c *Clients) restConfig(data []byte) (*rest.Config, error) {
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
	if cl, ok := kc.Clusters[kctx.Cluster]; ok && cl.CertificateAuthority != "" {
		return errors.New("certificate-authority is a file path; embed it as certificate-authority-data")
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
