// Package kube gives the federation its handle on one cluster: the scheme of
// every type it reads or writes and a Cluster with a controller-runtime
// client and a client-go clientset over the same rest.Config.
package kube

import (
	"fmt"

	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/controller-runtime/pkg/client"

	aboutv1 "github.com/kilofed/kilofed/federation/apis/about/v1alpha1"
	fedv1 "github.com/kilofed/kilofed/federation/apis/federation/v1alpha1"
	kilov1 "github.com/kilofed/kilofed/mesh/apis/kilo/v1alpha1"
)

// Scheme returns a scheme with the built-in types, Peers, ClusterProperty,
// Announcement and RemoteCluster.
func Scheme() *runtime.Scheme {
	s := runtime.NewScheme()
	for _, add := range []func(*runtime.Scheme) error{clientgoscheme.AddToScheme, kilov1.AddToScheme, aboutv1.AddToScheme, fedv1.AddToScheme} {
		if err := add(s); err != nil {
			panic(err) // only on a programming error: conflicting registrations
		}
	}
	return s
}

// Cluster is one cluster as the federation talks to it.
type Cluster struct {
	// Name is how the operator called it: the kubeconfig context.
	Name string
	// Config reaches its API server.
	Config *rest.Config
	// Client reads and writes typed objects.
	Client client.Client
	// Kube is the clientset (TokenRequest and the like).
	Kube kubernetes.Interface
}

// New returns the Cluster reached by cfg.
func New(name string, cfg *rest.Config) (*Cluster, error) {
	c, err := client.New(cfg, client.Options{Scheme: Scheme()})
	if err != nil {
		return nil, fmt.Errorf("client for %s: %w", name, err)
	}
	k, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return nil, fmt.Errorf("clientset for %s: %w", name, err)
	}
	return &Cluster{Name: name, Config: cfg, Client: c, Kube: k}, nil
}

// FromKubeconfig returns the Cluster of a kubeconfig context: kubeconfig ""
// means the default loading rules ($KUBECONFIG, ~/.kube/config), context ""
// the current context. Name is the context's name.
func FromKubeconfig(kubeconfig, context string) (*Cluster, error) {
	rules := clientcmd.NewDefaultClientConfigLoadingRules()
	if kubeconfig != "" {
		rules.ExplicitPath = kubeconfig
	}
	cc := clientcmd.NewNonInteractiveDeferredLoadingClientConfig(rules, &clientcmd.ConfigOverrides{CurrentContext: context})
	raw, err := cc.RawConfig()
	if err != nil {
		return nil, fmt.Errorf("read kubeconfig: %w", err)
	}
	name := context
	if name == "" {
		name = raw.CurrentContext
	}
	if _, ok := raw.Contexts[name]; !ok {
		return nil, fmt.Errorf("kubeconfig has no context %q (it has %d contexts: kubectl config get-contexts lists them)", name, len(raw.Contexts))
	}
	cfg, err := cc.ClientConfig()
	if err != nil {
		return nil, fmt.Errorf("kubeconfig context %s: %w", name, err)
	}
	return New(name, cfg)
}
