//go:build linux

package lab

import (
	"context"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"

	meshconfig "github.com/kilofed/kilofed/mesh/config"
)

// AgentTokenTTL is how long the token of an agent's kubeconfig is valid
// (the lab's API servers set no maximum): longer than any lab run.
const AgentTokenTTL = 12 * time.Hour

// Names of the agent's identity, as in mesh/config/rbac/agent.yaml.
const (
	agentServiceAccountNamespace = "kube-system"
	agentServiceAccount          = "kilo"
)

// meshInstalls remembers, per cluster, the one installation of the mesh's
// manifests.
var meshInstalls sync.Map // *Cluster -> *meshInstall

type meshInstall struct {
	once sync.Once
	err  error
}

// InstallMesh applies the mesh's manifests (mesh/config: the Peer CRD, the
// agent's RBAC and heartbeat namespace, the admission policies that let an
// agent write only its own node's state) with the real kubectl, once per
// cluster; later calls return the first one's result. Node.StartAgent
// calls it.
func (c *Cluster) InstallMesh(ctx context.Context) error {
	v, _ := meshInstalls.LoadOrStore(c, &meshInstall{})
	in := v.(*meshInstall)
	in.once.Do(func() { in.err = c.installMesh(ctx) })
	return in.err
}

func (c *Cluster) installMesh(ctx context.Context) error {
	paths, files := meshconfig.Manifests()
	dir := filepath.Join(c.lab.Dir, c.Name, "mesh-config")
	for _, p := range paths {
		data, err := fs.ReadFile(files, p)
		if err != nil {
			return fmt.Errorf("read mesh manifest %s: %w", p, err)
		}
		file := filepath.Join(dir, p)
		if err := os.MkdirAll(filepath.Dir(file), 0o755); err != nil {
			return fmt.Errorf("write mesh manifests: %w", err)
		}
		if err := os.WriteFile(file, data, 0o644); err != nil {
			return fmt.Errorf("write mesh manifests: %w", err)
		}
		if out, err := c.Kubectl(ctx, "apply", "-f", file); err != nil {
			return fmt.Errorf("install %s in %s: %w\n%s", p, c.Name, err, out)
		}
		if strings.HasPrefix(p, "crd/") {
			if out, err := c.Kubectl(ctx, "wait", "--for=condition=Established", "--timeout=60s", "-f", file); err != nil {
				return fmt.Errorf("CRD %s not established in %s: %w\n%s", p, c.Name, err, out)
			}
		}
	}
	return nil
}

// AgentKubeconfig writes the kubeconfig the node's agent runs with and
// returns its path (Dir/<cluster>/kg-<node>.kubeconfig): a token of the
// agent's ServiceAccount (kube-system/kilo) from the TokenRequest API,
// bound to the node's Node object, so that it carries
// authentication.kubernetes.io/node-name as a token projected into a pod on
// that node does, and the admission policy lets it write only that node's
// state. The token is valid for AgentTokenTTL, or until the Node is deleted.
func (n *Node) AgentKubeconfig(ctx context.Context) (string, error) {
	c := n.cluster
	node, err := c.client.CoreV1().Nodes().Get(ctx, n.Name, metav1.GetOptions{})
	if err != nil {
		return "", fmt.Errorf("token for the agent of %s: the Node: %w", n.Name, err)
	}
	ttl := int64(AgentTokenTTL / time.Second)
	req := &authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{
		ExpirationSeconds: &ttl,
		BoundObjectRef:    &authenticationv1.BoundObjectReference{APIVersion: "v1", Kind: "Node", Name: node.Name, UID: node.UID},
	}}
	tok, err := c.client.CoreV1().ServiceAccounts(agentServiceAccountNamespace).CreateToken(ctx, agentServiceAccount, req, metav1.CreateOptions{})
	if err != nil {
		return "", fmt.Errorf("token for the agent of %s (is the mesh's RBAC installed? Cluster.InstallMesh): %w", n.Name, err)
	}
	user := "system:serviceaccount:" + agentServiceAccountNamespace + ":" + agentServiceAccount
	cfg := clientcmdapi.NewConfig()
	cfg.Clusters[c.Name] = &clientcmdapi.Cluster{Server: c.APIServer, CertificateAuthorityData: c.pki.caPEM}
	cfg.AuthInfos[user] = &clientcmdapi.AuthInfo{Token: tok.Status.Token}
	ctxName := "kg-" + n.Name + "@" + c.Name
	cfg.Contexts[ctxName] = &clientcmdapi.Context{Cluster: c.Name, AuthInfo: user}
	cfg.CurrentContext = ctxName
	path := filepath.Join(c.lab.Dir, c.Name, "kg-"+sanitizeFileName(n.Name)+".kubeconfig")
	if err := clientcmd.WriteToFile(*cfg, path); err != nil {
		return "", fmt.Errorf("write the agent kubeconfig of %s: %w", n.Name, err)
	}
	return path, nil
}
