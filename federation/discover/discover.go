package discover

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"slices"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/util/validation"
	"sigs.k8s.io/controller-runtime/pkg/client"

	aboutv1 "github.com/kilofed/kilofed/federation/apis/about/v1alpha1"
	"github.com/kilofed/kilofed/federation/ranges"
	"github.com/kilofed/kilofed/mesh/k8s"
)

// ErrNoClusterID is returned by ClusterID when the cluster has no ID yet.
var ErrNoClusterID = errors.New("the cluster has no ID yet")

// ClusterID returns the value of the cluster's cluster.clusterset.k8s.io
// ClusterProperty, or ErrNoClusterID.
func ClusterID(ctx context.Context, c client.Reader) (string, error) {
	var p aboutv1.ClusterProperty
	err := c.Get(ctx, client.ObjectKey{Name: aboutv1.ClusterIDProperty}, &p)
	switch {
	case apierrors.IsNotFound(err):
		return "", ErrNoClusterID
	case err != nil:
		return "", fmt.Errorf("read ClusterProperty %s: %w", aboutv1.ClusterIDProperty, err)
	}
	return p.Spec.Value, nil
}

// ValidateClusterID returns why id cannot be a cluster's ID, or nil: it must
// be a DNS-1123 label (it names Peers and ServiceAccounts).
func ValidateClusterID(id string) error {
	if errs := validation.IsDNS1123Label(id); len(errs) > 0 {
		return fmt.Errorf("cluster ID %q is not a DNS-1123 label (%s): pass --cluster-id with lowercase letters, digits and '-'", id, errs[0])
	}
	return nil
}

// Options tune Ranges.
type Options struct {
	// PodCIDRs, when set, replace the Nodes' podCIDRs (for clusters whose
	// nodes don't carry them).
	PodCIDRs []netip.Prefix
	// ServiceCIDRs, when set, replace the ServiceCIDR objects.
	ServiceCIDRs []netip.Prefix
}

// Ranges returns the cluster's pod, Service and WireGuard ranges, with ID
// left empty.
func Ranges(ctx context.Context, c client.Reader, o Options) (ranges.Cluster, error) {
	var out ranges.Cluster
	var nodes corev1.NodeList
	if err := c.List(ctx, &nodes); err != nil {
		return out, fmt.Errorf("list Nodes: %w", err)
	}
	out.Pods = o.PodCIDRs
	var subnets []netip.Prefix
	for _, n := range nodes.Items {
		if len(o.PodCIDRs) == 0 {
			for _, s := range n.Spec.PodCIDRs {
				if p, err := netip.ParsePrefix(s); err == nil {
					out.Pods = append(out.Pods, p.Masked())
				}
			}
		}
		if s := n.Annotations[k8s.WireGuardIPAnnotation]; s != "" {
			if p, err := netip.ParsePrefix(s); err == nil {
				subnets = append(subnets, p.Masked())
			}
		}
	}
	out.Pods = sortPrefixes(out.Pods)
	subnets = sortPrefixes(subnets)
	switch len(subnets) {
	case 0:
	case 1:
		out.WireGuard = subnets[0]
	default:
		return out, fmt.Errorf("the nodes announce WireGuard IPs in %d different subnets %v: the agents disagree on --subnet; give every kg the same --subnet", len(subnets), subnets)
	}
	out.Services = o.ServiceCIDRs
	if len(out.Services) == 0 {
		var scs networkingv1.ServiceCIDRList
		if err := c.List(ctx, &scs); err != nil {
			return out, fmt.Errorf("list ServiceCIDRs (pass the Service ranges with a flag instead): %w", err)
		}
		for _, sc := range scs.Items {
			for _, s := range sc.Spec.CIDRs {
				if p, err := netip.ParsePrefix(s); err == nil {
					out.Services = append(out.Services, p.Masked())
				}
			}
		}
	}
	out.Services = sortPrefixes(out.Services)
	return out, nil
}

func sortPrefixes(ps []netip.Prefix) []netip.Prefix {
	slices.SortFunc(ps, func(a, b netip.Prefix) int {
		if c := a.Addr().Compare(b.Addr()); c != 0 {
			return c
		}
		return a.Bits() - b.Bits()
	})
	return slices.Compact(ps)
}
