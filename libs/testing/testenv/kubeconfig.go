package testenv

import (
	"errors"

	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
)

// Kubeconfig returns a self-contained kubeconfig (certificates and keys
// embedded, no file paths) that connects as cfg does: e.Config for cluster
// admin, or a config from AddUser. It is what a `…KubeconfigSecretRef`
// Secret holds, or what `kubectl --kubeconfig` reads.
func (e *Env) Kubeconfig(cfg *rest.Config) ([]byte, error) {
	if cfg == nil {
		cfg = e.Config
	}
	return Kubeconfig(cfg)
}

// Kubeconfig returns a self-contained kubeconfig that connects as cfg does.
func Kubeconfig(cfg *rest.Config) ([]byte, error) {
	if cfg.CAFile != "" || cfg.CertFile != "" || cfg.KeyFile != "" || cfg.BearerTokenFile != "" {
		return nil, errors.New("testenv: the config refers to files; only in-memory credentials can be embedded")
	}
	kc := clientcmdapi.NewConfig()
	kc.Clusters["test"] = &clientcmdapi.Cluster{
		Server:                   cfg.Host,
		CertificateAuthorityData: cfg.CAData,
		InsecureSkipTLSVerify:    cfg.Insecure,
	}
	kc.AuthInfos["test"] = &clientcmdapi.AuthInfo{
		ClientCertificateData: cfg.CertData,
		ClientKeyData:         cfg.KeyData,
		Token:                 cfg.BearerToken,
	}
	kc.Contexts["test"] = &clientcmdapi.Context{Cluster: "test", AuthInfo: "test"}
	kc.CurrentContext = "test"
	return clientcmd.Write(*kc)
}
