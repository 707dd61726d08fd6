package kgctl

import (
	"context"
	"fmt"
	"net/netip"
	"strings"
	"time"

	"github.com/spf13/pflag"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/kilofed/kilofed/mesh/k8s"
	"github.com/kilofed/kilofed/mesh/topology"
)

// BackendFlags configure how the CLI reads the cluster; they must match the
// agents' flags of the same names.
type BackendFlags struct {
	// TopologyLabel is kg's --topology-label; empty means k8s.DefaultTopologyLabel.
	TopologyLabel string
	// LeaseDuration is kg's --lease-duration; zero means k8s.DefaultLeaseDuration.
	LeaseDuration time.Duration
}

// meshFlagSet holds the text of the flags that name the agents' options.
type meshFlagSet struct {
	subnet, granularity, encapsulate string
	port                             uint16
	meshKeepalive                    time.Duration
	serviceCIDRs                     []string
	backend                          BackendFlags
	verbose                          bool
}

// register adds the flags to fs, with kg's names.
func (m *meshFlagSet) register(fs *pflag.FlagSet) {
	fs.StringVar(&m.subnet, "subnet", "", "the agents' --subnet (default inferred from their kilo.squat.ai/wireguard-ip, else "+topology.DefaultSubnet.String()+")")
	fs.StringVar(&m.granularity, "mesh-granularity", "", "the agents' --mesh-granularity: location, full or cross (default inferred from their kilo.squat.ai/granularity, else location)")
	fs.Uint16Var(&m.port, "port", topology.DefaultPort, "the agents' WireGuard --port")
	fs.StringVar(&m.encapsulate, "encapsulate", string(DefaultEncapsulate), "the agents' --encapsulate: never, crosssubnet or always (graph labels only)")
	fs.DurationVar(&m.meshKeepalive, "mesh-keepalive", topology.DefaultMeshKeepalive, "the agents' --mesh-keepalive")
	fs.StringSliceVar(&m.serviceCIDRs, "service-cidr", nil, "the agents' --service-cidr, comma-separated")
	fs.StringVar(&m.backend.TopologyLabel, "topology-label", k8s.DefaultTopologyLabel, "the agents' --topology-label: node label read for the location")
	fs.DurationVar(&m.backend.LeaseDuration, "lease-duration", k8s.DefaultLeaseDuration, "the agents' --lease-duration: nodes whose heartbeat is older are not ready")
	fs.BoolVarP(&m.verbose, "verbose", "v", false, "also say which options were inferred from the agents")
}

// flags parses the flags' text into MeshFlags.
func (m *meshFlagSet) flags() (MeshFlags, error) {
	f := MeshFlags{Port: m.port, MeshKeepalive: m.meshKeepalive}
	if m.subnet != "" {
		p, err := netip.ParsePrefix(m.subnet)
		if err != nil {
			return f, fmt.Errorf("%w: --subnet %q is not a CIDR such as %s", ErrUsage, m.subnet, topology.DefaultSubnet)
		}
		f.Subnet = p
	}
	if m.granularity != "" {
		g, err := topology.ParseGranularity(m.granularity)
		if err != nil {
			return f, fmt.Errorf("%w: --mesh-granularity %w", ErrUsage, err)
		}
		f.Granularity = g
	}
	e, err := topology.ParseEncapsulate(m.encapsulate)
	if err != nil {
		return f, fmt.Errorf("%w: --encapsulate %w", ErrUsage, err)
	}
	f.Encapsulate = e
	cidrs, err := parseCIDRs("--service-cidr", m.serviceCIDRs)
	if err != nil {
		return f, err
	}
	f.ServiceCIDRs = cidrs
	return f, nil
}

// printNotes writes the notes of mesh on env.Stderr: the warnings always;
// the inferences and the objects the backend could not read when verbose.
func (m *meshFlagSet) printNotes(env *Env, mesh *Mesh) {
	for _, n := range mesh.Notes {
		if m.verbose || strings.HasPrefix(n, "warning:") {
			fmt.Fprintf(env.Stderr, "%s: %s\n", env.Program, n)
		}
	}
	if m.verbose {
		for _, p := range mesh.Snapshot.Problems {
			fmt.Fprintf(env.Stderr, "%s: cannot read %v\n", env.Program, p)
		}
	}
}

// parseCIDRs parses the CIDRs of a list flag (each entry may hold several,
// comma-separated).
func parseCIDRs(flag string, list []string) ([]netip.Prefix, error) {
	var out []netip.Prefix
	for _, entry := range list {
		for _, s := range strings.Split(entry, ",") {
			if s = strings.TrimSpace(s); s == "" {
				continue
			}
			p, err := netip.ParsePrefix(s)
			if err != nil {
				return nil, fmt.Errorf("%w: %s %q is not a CIDR such as 10.11.0.0/16", ErrUsage, flag, s)
			}
			out = append(out, p.Masked())
		}
	}
	return out, nil
}

// OpenCluster opens the Source of the cluster that env's kubeconfig and
// context name, reading it as the agents do.
func OpenCluster(ctx context.Context, env *Env, b BackendFlags) (Source, error) {
	rc, err := RESTConfig(env.Kubeconfig, env.Context)
	if err != nil {
		return nil, err
	}
	return NewClusterSource(ctx, k8s.Config{
		RESTConfig: rc, TopologyLabel: b.TopologyLabel, LeaseDuration: b.LeaseDuration,
		Logger: env.logger(),
	})
}

// RESTConfig loads the client configuration: kubeconfig if given, else
// $KUBECONFIG, else ~/.kube/config, else the in-cluster service account;
// context picks a kubeconfig context other than the current one.
func RESTConfig(kubeconfig, context string) (*rest.Config, error) {
	rules := clientcmd.NewDefaultClientConfigLoadingRules()
	rules.ExplicitPath = kubeconfig
	cc := clientcmd.NewNonInteractiveDeferredLoadingClientConfig(rules, &clientcmd.ConfigOverrides{CurrentContext: context})
	rc, err := cc.ClientConfig()
	if clientcmd.IsEmptyConfig(err) {
		return nil, fmt.Errorf("no cluster to talk to: pass --kubeconfig FILE, set KUBECONFIG, or create ~/.kube/config")
	}
	if err != nil {
		return nil, fmt.Errorf("load the kubeconfig: %w", err)
	}
	return rc, nil
}
