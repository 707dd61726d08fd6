//go:build !linux

package lab

import (
	"context"
	"errors"
	"net/netip"
)

// clusterDNS needs Linux.
type clusterDNS struct{}

// ErrNoCoreDNS is returned by the cluster DNS methods of a lab started
// without Spec.CoreDNS.
var ErrNoCoreDNS = errors.New("the lab runs no CoreDNS (set Spec.CoreDNS)")

// DNSNode needs Linux.
func (c *Cluster) DNSNode() *Node { return nil }

// CoreDNSProcess needs Linux.
func (c *Cluster) CoreDNSProcess() *Process { return nil }

// Corefile needs Linux.
func (c *Cluster) Corefile() (string, error) { return "", errors.ErrUnsupported }

// SetClusterSetDNS needs Linux.
func (c *Cluster) SetClusterSetDNS(context.Context, netip.AddrPort) error {
	return errors.ErrUnsupported
}

// SchedulerProcess needs Linux.
func (c *Cluster) SchedulerProcess() *Process { return nil }
