package k8s

import (
	"context"
	"fmt"
	"net/netip"
	"slices"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// ServiceCIDRs returns the cluster's Service ranges, read from its
// networking.k8s.io/v1 ServiceCIDR objects (the API server creates the
// default one, "kubernetes", from --service-cluster-ip-range), so that
// neither kg nor kgctl needs --service-cidr to route Services to external
// peers.
func (c *Client) ServiceCIDRs(ctx context.Context) ([]netip.Prefix, error) {
	list, err := c.kube.NetworkingV1().ServiceCIDRs().List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, fmt.Errorf("list ServiceCIDRs (pass --service-cidr instead): %w", err)
	}
	var out []netip.Prefix
	for _, sc := range list.Items {
		for _, s := range sc.Spec.CIDRs {
			p, err := netip.ParsePrefix(s)
			if err != nil {
				return nil, fmt.Errorf("ServiceCIDR %s: %q is not a CIDR: %w", sc.Name, s, err)
			}
			out = append(out, p.Masked())
		}
	}
	slices.SortFunc(out, func(a, b netip.Prefix) int { return a.Addr().Compare(b.Addr()) })
	return slices.Compact(out), nil
}
