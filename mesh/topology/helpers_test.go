package topology

import (
	"crypto/sha256"
	"fmt"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/kilofed/kilofed/mesh/topology/wgconf"
)

// netipCmp lets go-cmp compare net/netip values.
var netipCmp = cmp.Options{
	cmp.Comparer(func(a, b netip.Prefix) bool { return a == b }),
	cmp.Comparer(func(a, b netip.Addr) bool { return a == b }),
	cmp.Comparer(func(a, b netip.AddrPort) bool { return a == b }),
}

// testKey returns a fixed public key derived from name.
func testKey(name string) wgconf.Key {
	return wgconf.Key(sha256.Sum256([]byte("key:" + name)))
}

func pfx(s string) netip.Prefix { return netip.MustParsePrefix(s) }

func pfxs(ss ...string) []netip.Prefix {
	var out []netip.Prefix
	for _, s := range ss {
		out = append(out, pfx(s))
	}
	return out
}

func addr(s string) netip.Addr { return netip.MustParseAddr(s) }

// node builds a ready node with a key; opts tweak it.
func node(name, location, internal, external string, pods ...string) Node {
	n := Node{Name: name, Location: location, Key: testKey(name), PodCIDRs: pfxs(pods...), Ready: true}
	if internal != "" {
		n.InternalIP = pfx(internal)
	}
	if external != "" {
		n.ExternalIP = addr(external)
	}
	return n
}

func with(n Node, f func(*Node)) Node { f(&n); return n }

// laptopPeer is the seed's developer Peer (seb-laptop).
func laptopPeer() Peer {
	return Peer{
		Name:                "seb-laptop",
		AllowedIPs:          pfxs("10.5.100.10/32"),
		PublicKey:           testKey("seb-laptop"),
		PersistentKeepalive: 25 * time.Second,
		Created:             time.Date(2026, 1, 2, 0, 0, 0, 0, time.UTC),
	}
}

// drPeer is the seed's disaster-recovery cluster Peer.
func drPeer() Peer {
	return Peer{
		Name:                "cluster-dr-ovhcloud",
		AllowedIPs:          pfxs("10.11.0.0/16", "10.21.0.0/16"),
		PublicKey:           testKey("cluster-dr-ovhcloud"),
		Endpoint:            &Endpoint{DNS: "dr-gateway.example.com", Port: 51820},
		PersistentKeepalive: 25 * time.Second,
		Created:             time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC),
	}
}

// routeLine renders one route canonically: dst via gw dev X src Y table T onlink.
func routeLine(r Route) string {
	parts := []string{r.Dst.String()}
	if r.Gw.IsValid() {
		parts = append(parts, "via", r.Gw.String())
	}
	if r.Dev != "" {
		parts = append(parts, "dev", r.Dev)
	}
	if r.Src.IsValid() {
		parts = append(parts, "src", r.Src.String())
	}
	if r.Table != 0 {
		parts = append(parts, "table", fmt.Sprint(r.Table))
	}
	if r.OnLink {
		parts = append(parts, "onlink")
	}
	return strings.Join(parts, " ")
}

func ruleLine(r Rule) string {
	parts := []string{}
	if r.Src.IsValid() {
		parts = append(parts, "from", r.Src.String())
	}
	if r.Dst.IsValid() {
		parts = append(parts, "to", r.Dst.String())
	}
	parts = append(parts, "table", fmt.Sprint(r.Table))
	if r.Priority != 0 {
		parts = append(parts, "priority", fmt.Sprint(r.Priority))
	}
	return strings.Join(parts, " ")
}

// render writes everything the topology gives out, as the golden files hold it.
func render(t *testing.T, top *Topology, nodes []Node, peers []Peer) string {
	t.Helper()
	var b strings.Builder
	fmt.Fprintf(&b, "# granularity %s, subnet %s, encapsulate %s\n", top.opts.Granularity, top.opts.Subnet, top.opts.Encapsulate)
	b.WriteString("\n== problems\n")
	for _, p := range top.Problems {
		b.WriteString(p.String() + "\n")
	}
	b.WriteString("\n== segments\n")
	for _, s := range top.Segments {
		e := s.Endpoint()
		fmt.Fprintf(&b, "segment %s (location %s): leader %s, wireguard %s, endpoint %s, public %t, keepalive %s\n",
			s.Name, s.Location, s.LeaderNode().Name, s.WireGuardIP, endpointString(e), s.HasPublicEndpoint(), s.PersistentKeepalive())
		var names []string
		for _, n := range s.Nodes {
			names = append(names, n.Name)
		}
		fmt.Fprintf(&b, "  nodes %s\n  allowed %s\n", strings.Join(names, ", "), joinPrefixes(s.AllowedIPs))
	}
	seen := make(map[string]bool)
	for _, n := range nodes {
		if seen[n.Name] {
			continue
		}
		seen[n.Name] = true
		fmt.Fprintf(&b, "\n== node %s", n.Name)
		if _, ok := top.Node(n.Name); !ok {
			_, err := top.WireGuardConfig(n.Name, wgconf.SecretKey{})
			fmt.Fprintf(&b, ": %v\n", err)
			continue
		}
		fmt.Fprintf(&b, " (leader %t)\n-- wireguard\n", top.IsLeader(n.Name))
		b.WriteString(wgconf.Render(top.NodeConf(n.Name), wgconf.RenderOptions{}))
		routes, rules := top.Routes(n.Name)
		b.WriteString("-- routes\n")
		for _, r := range routes {
			b.WriteString(routeLine(r) + "\n")
		}
		if len(rules) > 0 {
			b.WriteString("-- rules\n")
			for _, r := range rules {
				b.WriteString(ruleLine(r) + "\n")
			}
		}
		if rs := top.TunnelRemotes(n.Name); len(rs) > 0 {
			fmt.Fprintf(&b, "-- tunnel remotes\n%v\n", rs)
		}
	}
	for _, p := range peers {
		if seen["peer:"+p.Name] {
			continue
		}
		seen["peer:"+p.Name] = true
		fmt.Fprintf(&b, "\n== peer %s\n", p.Name)
		iface, err := top.PeerConf(p.Name)
		if err != nil {
			fmt.Fprintf(&b, "%v\n", err)
			continue
		}
		b.WriteString(wgconf.Render(iface, wgconf.RenderOptions{}))
	}
	b.WriteString("\n== dot\n")
	b.WriteString(top.DOT())
	return b.String()
}
