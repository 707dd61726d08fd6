package lab

import (
	"fmt"
	"path/filepath"
	"time"

	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
)

// writeKubeconfig writes a kubeconfig with one cluster, one user (client
// certificate) and one current context, all data embedded.
func writeKubeconfig(path, clusterName, server string, caPEM []byte, user string, cc clientCert) error {
	cfg := clientcmdapi.NewConfig()
	cfg.Clusters[clusterName] = &clientcmdapi.Cluster{Server: server, CertificateAuthorityData: caPEM}
	cfg.AuthInfos[user] = &clientcmdapi.AuthInfo{ClientCertificateData: cc.certPEM, ClientKeyData: cc.keyPEM}
	ctxName := user + "@" + clusterName
	cfg.Contexts[ctxName] = &clientcmdapi.Context{Cluster: clusterName, AuthInfo: user}
	cfg.CurrentContext = ctxName
	if err := clientcmd.WriteToFile(*cfg, path); err != nil {
		return fmt.Errorf("write kubeconfig %s: %w", path, err)
	}
	return nil
}

// restConfigFor returns a rest.Config for a client certificate.
func restConfigFor(server string, caPEM []byte, cc clientCert) *rest.Config {
	return &rest.Config{
		Host: server,
		TLSClientConfig: rest.TLSClientConfig{
			CAData:   caPEM,
			CertData: cc.certPEM,
			KeyData:  cc.keyPEM,
		},
		QPS:     100,
		Burst:   200,
		Timeout: 30 * time.Second,
	}
}

// IssueKubeconfig writes a kubeconfig for user in groups (a client
// certificate signed by the cluster's CA) and returns its path, for tests
// that need an identity other than the admin (RBAC checks).
func (c *Cluster) IssueKubeconfig(user string, groups ...string) (string, error) {
	cc, err := c.pki.issueClient(user, groups...)
	if err != nil {
		return "", err
	}
	path := filepath.Join(c.pki.dir, "kubeconfig-"+sanitizeFileName(user))
	if err := writeKubeconfig(path, c.Name, c.APIServer, c.pki.caPEM, user, cc); err != nil {
		return "", err
	}
	return path, nil
}
