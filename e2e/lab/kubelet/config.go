package kubelet

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"net/netip"

	"k8s.io/client-go/kubernetes"
)

// Sentinel errors returned (wrapped) by Run.
var (
	// ErrInvalidConfig means a Config field is missing or wrong.
	ErrInvalidConfig = errors.New("invalid kubelet config")
	// ErrPodCIDRExhausted means the node's podCIDR has no free address left.
	ErrPodCIDRExhausted = errors.New("pod CIDR exhausted")
	// ErrNetnsInUse means a pod network namespace name is already taken by
	// another pod (another lab cluster with a pod of the same namespace/name)
	// or by a leftover of a crashed run.
	ErrNetnsInUse = errors.New("pod network namespace already in use")
)

// Config describes one lab node for Run.
type Config struct {
	// Client is this cluster's client (the admin identity in the lab).
	Client kubernetes.Interface
	// Cluster is the cluster name, passed to workloads (the HTTP echo answers with it).
	Cluster string
	// NodeName is the name of the Node object and the value of spec.nodeName
	// of the pods this kubelet runs.
	NodeName string
	// NodeNetns is the named network namespace of the node, created by the
	// lab (it already has eth0 on the LAN and mgmt0). Host veths of the pods
	// and their /32 routes go there.
	NodeNetns string
	// InternalIP is the node's LAN IPv4 (or only) address.
	InternalIP netip.Addr
	// InternalIP6 is the node's LAN IPv6 address; optional.
	InternalIP6 netip.Addr
	// ExternalIP is the node's public (1:1 NAT) address; the zero Addr if none.
	ExternalIP netip.Addr
	// Labels are applied to the Node at registration, on top of
	// kubernetes.io/hostname, kubernetes.io/os and kubernetes.io/arch.
	Labels map[string]string
	// Annotations are applied to the Node at registration.
	Annotations map[string]string
	// PodCIDRs, if set, are written into Node.spec.podCIDR(s); if empty, Run
	// waits for kube-controller-manager to allocate them.
	PodCIDRs []netip.Prefix
	// WorkloadCommand is the argv prefix that runs a workload; the
	// workload.Main arguments are appended. The lab passes
	// {"/path/kilofed-lab", "workload"}.
	WorkloadCommand []string
	// ImageBinDir, optional, is the folder holding kilofed's own binaries
	// (kg, kilofed-controller): a container of an image whose repository
	// ends in one of those names runs that binary with its command, args
	// and env (see the package doc). When empty, such images get a
	// built-in workload like any other. The lab passes $KILOFED_BIN.
	ImageBinDir string
	// ClusterDNS is the nameserver written into each pod's resolv.conf; no
	// resolv.conf is written when it is the zero Addr.
	ClusterDNS netip.Addr
	// ClusterDomain is the cluster DNS domain, "cluster.local" when empty.
	ClusterDomain string
	// Logger receives the kubelet's logs; slog.Default() when nil.
	Logger *slog.Logger

	// LogDir, optional, is the folder for workload logs (<ns>_<pod>_<container>.log),
	// kept after Run. When empty, Run uses a temporary folder named
	// "kfl-kubelet-<node>-*" and removes it when it returns.
	LogDir string
	// RootDir, optional, is the node's own folder: pods' volumes
	// (pods/<uid>/: service account tokens, emptyDir, configMap, secret,
	// downwardAPI and projected volumes, removed with the pod) and its
	// hostPath root (hostpath/: hostPath /var/lib/kilo of a pod of this node
	// is <RootDir>/hostpath/var/lib/kilo, kept). When empty, Run uses a
	// temporary folder and removes it when it returns.
	RootDir string
	// MTU, optional, is the MTU of both ends of each pod veth; 0 keeps the
	// kernel default (1500).
	MTU int
	// Serving, optional, serves the kubelet API (exec, containerLogs,
	// healthz) so that `kubectl exec` and `kubectl logs` work; without it
	// the Node still reports port 10250 but nothing answers there.
	Serving *ServingConfig
}

// validate checks the config and fills defaults into a copy.
func (c Config) validate() (Config, error) {
	var errs []error
	if c.Client == nil {
		errs = append(errs, errors.New("no Client: pass the cluster's kubernetes.Interface"))
	}
	if c.NodeName == "" {
		errs = append(errs, errors.New("empty NodeName"))
	}
	if c.NodeNetns == "" {
		errs = append(errs, errors.New("empty NodeNetns: give the named netns the lab created for the node"))
	}
	if !c.InternalIP.IsValid() {
		errs = append(errs, errors.New("no InternalIP: give the node's LAN address"))
	}
	if c.InternalIP6.IsValid() && !c.InternalIP6.Is6() {
		errs = append(errs, fmt.Errorf("internal IPv6 %s is not an IPv6 address", c.InternalIP6))
	}
	if len(c.WorkloadCommand) == 0 {
		errs = append(errs, errors.New(`empty WorkloadCommand: pass e.g. {"/path/kilofed-lab", "workload"}`))
	}
	if c.MTU != 0 && (c.MTU < 1280 || c.MTU > 65535) {
		errs = append(errs, fmt.Errorf("mtu %d is outside 1280..65535 (0 keeps the default)", c.MTU))
	}
	if _, err := podCIDRsByFamily(c.PodCIDRs); err != nil {
		errs = append(errs, err)
	}
	if err := c.Serving.validate(); err != nil {
		errs = append(errs, err)
	}
	if err := errors.Join(errs...); err != nil {
		return c, fmt.Errorf("%w: %w", ErrInvalidConfig, err)
	}
	if c.ClusterDomain == "" {
		c.ClusterDomain = "cluster.local"
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	c.Logger = c.Logger.With("node", c.NodeName)
	return c, nil
}

// podCIDRsByFamily checks that prefixes hold at most one IPv4 and one IPv6
// prefix and returns them masked, IPv4 first.
func podCIDRsByFamily(prefixes []netip.Prefix) ([]netip.Prefix, error) {
	var v4, v6 []netip.Prefix
	for _, p := range prefixes {
		if !p.IsValid() {
			return nil, fmt.Errorf("pod CIDR %v is not valid", p)
		}
		if p.Addr().Is4() {
			v4 = append(v4, p.Masked())
		} else {
			v6 = append(v6, p.Masked())
		}
	}
	if len(v4) > 1 || len(v6) > 1 {
		return nil, fmt.Errorf("pod CIDRs %v: give at most one IPv4 and one IPv6 prefix", prefixes)
	}
	return append(v4, v6...), nil
}

// podHash is the short hash of a pod's namespace/name that names its netns
// and host veth.
func podHash(namespace, name string) string {
	sum := sha256.Sum256([]byte(namespace + "/" + name))
	return hex.EncodeToString(sum[:5])
}

// PodNetns returns the name of the network namespace of the pod
// namespace/name running on the node whose namespace is nodeNetns:
// "kfl-pod-" followed by 10 hex digits of a hash, the same on every call, so
// the lab can `ip netns exec` into a pod. The node's namespace (which names
// the lab run, the cluster and the node) is part of the hash, so that pods of
// the same name in two clusters or two labs never share a namespace.
func PodNetns(nodeNetns, namespace, name string) string {
	return "kfl-pod-" + podHash(nodeNetns+"/"+namespace, name)
}

// hostVethName returns the node-side veth name of a pod, 14 characters
// (Linux allows 15).
func hostVethName(namespace, name string) string {
	return "kflp" + podHash(namespace, name)
}
