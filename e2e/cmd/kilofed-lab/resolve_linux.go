//go:build linux

package main

import (
	"context"
	"fmt"
	"net/netip"
	"time"

	"github.com/miekg/dns"

	"github.com/kilofed/kilofed/e2e/lab"
)

// resolveUntil asks server for name's A records from the network namespace
// of a pod of c, as the pod's resolver would, until an answer holds one or
// within passes, and returns the answer's records as dig prints them.
func resolveUntil(ctx context.Context, c *lab.Cluster, namespace, pod string, server netip.AddrPort, name string, within time.Duration) ([]string, error) {
	ctx, cancel := context.WithTimeout(ctx, within)
	defer cancel()
	ns, err := c.PodNamespace(ctx, namespace, pod)
	if err != nil {
		return nil, err
	}
	for {
		r, err := ns.QueryDNS(ctx, "udp", server, name, dns.TypeA)
		if err == nil && r.Rcode == dns.RcodeSuccess && len(r.Answer) > 0 {
			var out []string
			for _, rr := range r.Answer {
				out = append(out, rr.String())
			}
			return out, nil
		}
		if err == nil {
			err = fmt.Errorf("answer %s with %d records", dns.RcodeToString[r.Rcode], len(r.Answer))
		}
		select {
		case <-ctx.Done():
			return nil, fmt.Errorf("no A record within %s: %w", within, err)
		case <-time.After(300 * time.Millisecond):
		}
	}
}
