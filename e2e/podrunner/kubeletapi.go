package podrunner

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"math/big"
	"net"
	"net/http"
	"strconv"
	"time"

	"github.com/virtual-kubelet/virtual-kubelet/node/nodeutil"
)

// kubeletAPI serves the node's kubelet API (logs; exec, attach and
// port-forward answer "not supported") on 127.0.0.1, so `kubectl logs` of an
// agent pod works as on a real node: the kube-apiserver connects to the
// node's InternalIP and daemonEndpoints.kubeletEndpoint port.
//
// The certificate is self-signed and made at start; the API server does not
// verify kubelet serving certificates unless --kubelet-certificate-authority
// is set (kwokctl does not set it). Requests are not authenticated: the
// listener is on loopback of a developer's or CI machine, and serves only the
// pods of this node.
func kubeletAPI(node string) (nodeutil.NodeOpt, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	addr := l.Addr().String()
	l.Close()
	_, port, _ := net.SplitHostPort(addr)
	p, _ := strconv.Atoi(port)
	cert, err := selfSigned(node)
	if err != nil {
		return nil, err
	}
	mux := http.NewServeMux()
	return func(cfg *nodeutil.NodeConfig) error {
		if err := nodeutil.WithTLSConfig(func(c *tls.Config) error {
			c.Certificates = []tls.Certificate{cert}
			return nil
		})(cfg); err != nil {
			return err
		}
		if err := nodeutil.AttachProviderRoutes(mux)(cfg); err != nil {
			return err
		}
		cfg.Handler = mux
		cfg.HTTPListenAddr = addr
		cfg.NodeSpec.Status.DaemonEndpoints.KubeletEndpoint.Port = int32(p)
		return nil
	}, nil
}

func selfSigned(node string) (tls.Certificate, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return tls.Certificate{}, err
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(time.Now().UnixNano()),
		Subject:      pkix.Name{CommonName: node},
		NotBefore:    time.Now().Add(-time.Hour),
		NotAfter:     time.Now().Add(30 * 24 * time.Hour),
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		DNSNames:     []string{node, "localhost"},
		IPAddresses:  []net.IP{net.IPv4(127, 0, 0, 1)},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return tls.Certificate{}, err
	}
	return tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key}, nil
}
