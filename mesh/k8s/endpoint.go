package k8s

import (
	"errors"
	"net"
	"net/netip"
	"strconv"
	"strings"

	"github.com/kilofed/kilofed/mesh/apis/kilo/v1alpha1"
	"github.com/kilofed/kilofed/mesh/topology"
)

var errBadAddr = errors.New("not an IP address")

// endpoint picks the node's endpoint; see NodeFromObject.
func (p *nodeParser) endpoint(n topology.Node) *topology.Endpoint {
	a := p.node.Annotations
	if s := strings.TrimSpace(a[ForceEndpointAnnotation]); s != "" {
		if e, err := parseHostPort(s); err == nil {
			return e
		}
		p.fail(ForceEndpointAnnotation, s, wantEndpoint)
	}
	var port uint16
	if s := strings.TrimSpace(a[EndpointAnnotation]); s != "" {
		if only, ok := parsePortOnly(s); ok {
			port = only
		} else if e, err := parseHostPort(s); err == nil {
			return e
		} else {
			p.fail(EndpointAnnotation, s, wantEndpoint+", or :port")
		}
	}
	for _, addr := range []netip.Addr{n.ExternalIP, n.InternalIP.Addr(), n.InternalIP6.Addr()} {
		if addr.IsValid() {
			// A zero port is filled with the topology's default port.
			return &topology.Endpoint{Addr: netip.AddrPortFrom(addr, port), Port: port}
		}
	}
	return nil
}

// parsePortOnly parses ":port".
func parsePortOnly(s string) (uint16, bool) {
	if !strings.HasPrefix(s, ":") {
		return 0, false
	}
	n, err := strconv.ParseUint(s[1:], 10, 16)
	return uint16(n), err == nil && n > 0
}

// parseHostPort parses "host:port" into an Endpoint; a DNS name is kept
// unresolved.
func parseHostPort(s string) (*topology.Endpoint, error) {
	pe, err := v1alpha1.ParseEndpoint(s)
	if err != nil {
		return nil, err
	}
	return endpointOf(&pe), nil
}

// endpointOf converts a valid API endpoint; DNS wins over IP, as in Kilo.
func endpointOf(pe *v1alpha1.PeerEndpoint) *topology.Endpoint {
	port := uint16(pe.Port)
	if pe.DNS != "" {
		return &topology.Endpoint{DNS: pe.DNS, Port: port}
	}
	ip, _ := netip.ParseAddr(pe.IP)
	return &topology.Endpoint{Addr: netip.AddrPortFrom(ip.Unmap(), port), Port: port}
}

// FormatEndpoint returns e as "host:port" (a DNS name if it has one), the
// form of kilo.squat.ai/endpoint and force-endpoint.
func FormatEndpoint(e topology.Endpoint) string {
	port := e.Port
	if port == 0 {
		port = e.Addr.Port()
	}
	host := e.DNS
	if host == "" {
		host = e.Addr.Addr().String()
	}
	return net.JoinHostPort(host, strconv.Itoa(int(port)))
}
