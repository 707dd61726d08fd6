package k8s

import (
	"net/netip"
	"strconv"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/kilofed/kilofed/mesh/topology"
	"github.com/kilofed/kilofed/mesh/topology/wgconf"
)

// What valid values look like, for error messages.
const (
	wantKey       = "a WireGuard public key: 44 base64 characters as printed by `wg pubkey`"
	wantEndpoint  = `host:port such as 195.154.10.20:51820, gw.example.com:51820 or [2001:db8::1]:51820`
	wantIP        = `an IP address with its prefix length such as 10.0.1.10/24, at most one IPv4 and one IPv6 separated by a comma, or "-" for none`
	wantCIDRs     = "CIDRs separated by commas, such as 192.168.10.0/24,10.20.0.0/16"
	wantKeepalive = "a number of seconds from 0 to 65535, such as 25"
	wantPodCIDR   = "a CIDR such as 10.42.1.0/24"
)

// ParseOptions configure NodeFromObject.
type ParseOptions struct {
	// TopologyLabel is the label read for the location when the node has
	// no kilo.squat.ai/location annotation; empty means DefaultTopologyLabel.
	TopologyLabel string
}

// NodeFromObject reads a Node into a topology.Node. It keeps every value it
// can read and returns one error (a Problem wrapping an AnnotationError) per
// value it cannot, which is then read as if absent; a missing value (no key
// yet, no pod CIDR) is no error, the topology reports those.
//
//   - Location: kilo.squat.ai/location, else the topology label.
//   - Key: kilo.squat.ai/key, else kilo.squat.ai/public-key.
//   - InternalIP, InternalIP6: kilo.squat.ai/force-internal-ip ("" or "-"
//     for none), else kilo.squat.ai/internal-ip, else the status InternalIP
//     addresses; a family missing from kilo.squat.ai/internal-ip is taken
//     from the status. An invalid annotation is reported and skipped. A status address has no prefix length, so it becomes a
//     single-host prefix (/32, /128): its subnet is unknown, and crosssubnet
//     encapsulation then treats it as in another subnet and encapsulates,
//     which is always safe. The agent publishes its interface's real prefix
//     in kilo.squat.ai/internal-ip so that nodes of one subnet talk natively.
//   - ExternalIP: the first status ExternalIP, IPv4 preferred.
//   - Endpoint: kilo.squat.ai/force-endpoint, else the host:port the agent
//     published in kilo.squat.ai/endpoint, else the external IP, else the
//     internal IP; the port of the last two comes from kilo.squat.ai/endpoint
//     (host:port or :port) or is left zero for the topology's default port.
//     DNS names are kept unresolved.
//   - PodCIDRs: spec.podCIDRs, else spec.podCIDR.
//   - Ready: the Node's Ready condition is not False. Client.Snapshot also
//     requires a fresh heartbeat Lease.
func NodeFromObject(n *corev1.Node, opts ParseOptions) (topology.Node, []error) {
	p := nodeParser{node: n}
	label := opts.TopologyLabel
	if label == "" {
		label = DefaultTopologyLabel
	}
	a := n.Annotations
	out := topology.Node{
		Name:                n.Name,
		Location:            a[LocationAnnotation],
		Key:                 p.key(),
		PodCIDRs:            p.podCIDRs(),
		AllowedLocationIPs:  p.prefixes(AllowedLocationIPsAnnotation),
		WireGuardIP:         p.wireGuardIP(),
		PersistentKeepalive: p.keepalive(),
		Leader:              isLeader(a),
		Ready:               conditionReady(n),
	}
	if out.Location == "" {
		out.Location = n.Labels[label]
	}
	out.InternalIP, out.InternalIP6 = p.internalIPs()
	out.ExternalIP = statusAddress(n, corev1.NodeExternalIP, true)
	out.Endpoint = p.endpoint(out)
	return out, p.errs
}

// nodeParser collects the errors of one Node's values.
type nodeParser struct {
	node *corev1.Node
	errs []error
}

func (p *nodeParser) fail(annotation, value, want string) {
	p.errs = append(p.errs, Problem{Kind: topology.KindNode, Name: p.node.Name,
		Err: &AnnotationError{Annotation: annotation, Value: value, Want: want}})
}

func (p *nodeParser) key() wgconf.Key {
	name := KeyAnnotation
	s, ok := p.node.Annotations[name]
	if !ok {
		name = PublicKeyAnnotation
		s = p.node.Annotations[name]
	}
	if s == "" {
		return wgconf.Key{}
	}
	k, err := parseKey(s)
	if err != nil {
		p.fail(name, s, wantKey)
	}
	return k
}

func isLeader(a map[string]string) bool {
	v, ok := a[LeaderAnnotation]
	return ok && !strings.EqualFold(strings.TrimSpace(v), "false")
}

// conditionReady reports whether the Node's Ready condition is not False.
func conditionReady(n *corev1.Node) bool {
	for _, c := range n.Status.Conditions {
		if c.Type == corev1.NodeReady {
			return c.Status != corev1.ConditionFalse
		}
	}
	return true
}

// statusAddress returns the first status address of type t, IPv4 first
// when prefer4, as a single address.
func statusAddress(n *corev1.Node, t corev1.NodeAddressType, prefer4 bool) netip.Addr {
	var v4, v6 netip.Addr
	for _, a := range n.Status.Addresses {
		if a.Type != t {
			continue
		}
		ip, err := netip.ParseAddr(a.Address)
		if err != nil {
			continue
		}
		ip = ip.Unmap()
		if ip.Is4() && !v4.IsValid() {
			v4 = ip
		} else if ip.Is6() && !v6.IsValid() {
			v6 = ip
		}
	}
	if v4.IsValid() && (prefer4 || !v6.IsValid()) {
		return v4
	}
	return v6
}

func (p *nodeParser) internalIPs() (v4, v6 netip.Prefix) {
	a := p.node.Annotations
	if s, ok := a[ForceInternalIPAnnotation]; ok {
		if s = strings.TrimSpace(s); s == "" || s == "-" {
			return netip.Prefix{}, netip.Prefix{}
		}
		if v4, v6, ok := p.addrList(ForceInternalIPAnnotation, s); ok {
			return v4, v6
		}
		// Invalid: reported, and read as if the annotation were absent.
	}
	if s := strings.TrimSpace(a[InternalIPAnnotation]); s != "" {
		v4, v6, _ = p.addrList(InternalIPAnnotation, s)
	}
	var status4, status6 netip.Addr
	for _, ad := range p.node.Status.Addresses {
		if ad.Type != corev1.NodeInternalIP {
			continue
		}
		if ip, err := netip.ParseAddr(ad.Address); err == nil {
			ip = ip.Unmap().WithZone("")
			if ip.Is4() && !status4.IsValid() {
				status4 = ip
			} else if ip.Is6() && !status6.IsValid() {
				status6 = ip
			}
		}
	}
	if !v4.IsValid() && status4.IsValid() {
		v4 = netip.PrefixFrom(status4, 32)
	}
	if !v6.IsValid() && status6.IsValid() {
		v6 = netip.PrefixFrom(status6, 128)
	}
	return v4, v6
}

// addrList parses "addr[/bits][,addr[/bits]]" with at most one address per
// family; the address keeps its host bits. ok is false after an error.
func (p *nodeParser) addrList(annotation, s string) (v4, v6 netip.Prefix, ok bool) {
	for _, f := range strings.Split(s, ",") {
		pr, err := parseAddrPrefix(strings.TrimSpace(f))
		switch {
		case err != nil, pr.Addr().Is4() && v4.IsValid(), pr.Addr().Is6() && v6.IsValid():
			p.fail(annotation, s, wantIP)
			return netip.Prefix{}, netip.Prefix{}, false
		case pr.Addr().Is4():
			v4 = pr
		default:
			v6 = pr
		}
	}
	return v4, v6, true
}

// parseAddrPrefix parses "10.0.1.10/24" keeping the host bits, or a bare
// address as a single-host prefix.
func parseAddrPrefix(s string) (netip.Prefix, error) {
	if !strings.Contains(s, "/") {
		a, err := netip.ParseAddr(s)
		if err != nil || a.Zone() != "" {
			return netip.Prefix{}, errBadAddr
		}
		a = a.Unmap()
		return netip.PrefixFrom(a, a.BitLen()), nil
	}
	pr, err := netip.ParsePrefix(s)
	if err != nil {
		return netip.Prefix{}, err
	}
	if pr.Addr().Is4In6() {
		pr = netip.PrefixFrom(pr.Addr().Unmap(), max(pr.Bits()-96, 0))
	}
	return pr, nil
}

func (p *nodeParser) wireGuardIP() netip.Prefix {
	s := strings.TrimSpace(p.node.Annotations[WireGuardIPAnnotation])
	if s == "" {
		return netip.Prefix{}
	}
	pr, err := parseAddrPrefix(s)
	if err != nil {
		p.fail(WireGuardIPAnnotation, s, "an IP address with the WireGuard subnet's prefix length, such as 10.4.0.1/16")
	}
	return pr
}

// prefixes parses a comma-separated list of CIDRs, keeping the valid ones.
func (p *nodeParser) prefixes(annotation string) []netip.Prefix {
	s := p.node.Annotations[annotation]
	var out []netip.Prefix
	for _, f := range strings.Split(s, ",") {
		if f = strings.TrimSpace(f); f == "" {
			continue
		}
		pr, err := netip.ParsePrefix(f)
		if err != nil {
			p.fail(annotation, f, wantCIDRs)
			continue
		}
		out = append(out, pr.Masked())
	}
	return out
}

func (p *nodeParser) podCIDRs() []netip.Prefix {
	field, list := "spec.podCIDRs", p.node.Spec.PodCIDRs
	if len(list) == 0 && p.node.Spec.PodCIDR != "" {
		field, list = "spec.podCIDR", []string{p.node.Spec.PodCIDR}
	}
	var out []netip.Prefix
	for _, s := range list {
		pr, err := netip.ParsePrefix(s)
		if err != nil {
			p.fail(field, s, wantPodCIDR)
			continue
		}
		out = append(out, pr.Masked())
	}
	return out
}

func (p *nodeParser) keepalive() time.Duration {
	s, ok := p.node.Annotations[PersistentKeepaliveAnnotation]
	if !ok {
		return 0
	}
	n, err := strconv.ParseUint(strings.TrimSpace(s), 10, 16)
	if err != nil {
		p.fail(PersistentKeepaliveAnnotation, s, wantKeepalive)
		return 0
	}
	return time.Duration(n) * time.Second
}
