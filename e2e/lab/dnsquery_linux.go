//go:build linux

package lab

import (
	"context"
	"net"
	"net/netip"
	"time"

	"github.com/miekg/dns"
)

// QueryDNS sends one DNS query (recursion desired) for name and qtype
// (dns.TypeA, dns.TypeSRV, ...) to server over net ("udp" or "tcp") from
// inside the namespace, as a pod there would, and returns the answer: for
// instance to the kube-dns ClusterIP from a pod's namespace (see
// Cluster.PodNamespace). ctx bounds the exchange (at most 5 s).
func (ns *Namespace) QueryDNS(ctx context.Context, network string, server netip.AddrPort, name string, qtype uint16) (*dns.Msg, error) {
	conn, err := dialIn(ns.Name, network, server)
	if err != nil {
		return nil, err
	}
	defer conn.Close()
	m := new(dns.Msg)
	m.SetQuestion(dns.Fqdn(name), qtype)
	m.RecursionDesired = true
	client := &dns.Client{Net: network, Timeout: 5 * time.Second}
	r, _, err := client.ExchangeWithConnContext(ctx, m, &dns.Conn{Conn: conn})
	return r, err
}

// dialIn opens a connection from inside the named namespace (the socket
// stays there once the thread leaves).
func dialIn(netns, network string, addr netip.AddrPort) (net.Conn, error) {
	ns, err := openNS(netns)
	if err != nil {
		return nil, err
	}
	defer ns.Close()
	var conn net.Conn
	err = ns.do(func() (err error) {
		conn, err = net.DialTimeout(network, addr.String(), 5*time.Second)
		return err
	})
	return conn, err
}
