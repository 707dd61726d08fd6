package lab

import (
	"fmt"
	"path/filepath"

	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
)

// Kubeconfig writes Dir/kubeconfig, one kubeconfig holding every cluster's
// admin credentials with one context per cluster named after the cluster
// (so that `kilofed --context prod join dr` works as in production), the
// first cluster's context current, and returns its path.
func (l *Lab) Kubeconfig() (string, error) {
	merged := clientcmdapi.NewConfig()
	for _, c := range l.clusters {
		cfg, err := clientcmd.LoadFromFile(c.Kubeconfig)
		if err != nil {
			return "", fmt.Errorf("read the kubeconfig of cluster %s: %w", c.Name, err)
		}
		cur, ok := cfg.Contexts[cfg.CurrentContext]
		if !ok {
			return "", fmt.Errorf("kubeconfig of cluster %s: no current context", c.Name)
		}
		cl, user := cfg.Clusters[cur.Cluster], cfg.AuthInfos[cur.AuthInfo]
		if cl == nil || user == nil {
			return "", fmt.Errorf("kubeconfig of cluster %s: context %s names no cluster or user", c.Name, cfg.CurrentContext)
		}
		merged.Clusters[c.Name] = cl
		merged.AuthInfos["admin@"+c.Name] = user
		merged.Contexts[c.Name] = &clientcmdapi.Context{Cluster: c.Name, AuthInfo: "admin@" + c.Name}
		if merged.CurrentContext == "" {
			merged.CurrentContext = c.Name
		}
	}
	path := filepath.Join(l.Dir, "kubeconfig")
	if err := clientcmd.WriteToFile(*merged, path); err != nil {
		return "", fmt.Errorf("write %s: %w", path, err)
	}
	return path, nil
}
