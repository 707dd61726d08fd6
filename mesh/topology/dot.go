package topology

import (
	"fmt"
	"net/netip"
	"slices"
	"strings"
	"unicode"
)

// DOT returns the topology as a Graphviz digraph: one cluster per location
// with its nodes (leaders drawn with a double border), bold edges for the
// WireGuard tunnels, dotted edges for traffic inside a location, the peers
// in a cluster of their own with dashed tunnels, and the excluded nodes and
// peers in a red cluster. The output is the same for the same topology.
func (t *Topology) DOT() string {
	var b strings.Builder
	b.WriteString("digraph kilo {\n")
	fmt.Fprintf(&b, "\tlabel=%s;\n\tlabelloc=t;\n\toutputorder=nodesfirst;\n\toverlap=false;\n", label(
		fmt.Sprintf("kilofed mesh %s, %s granularity, encapsulate %s", t.opts.Subnet, t.opts.Granularity, t.opts.Encapsulate)))
	b.WriteString("\tnode [shape=ellipse];\n")
	warnings := make(map[string][]string)
	for _, p := range t.Problems {
		if p.Severity == Warning {
			warnings[p.Kind+":"+p.Name] = append(warnings[p.Kind+":"+p.Name], p.Code)
		}
	}
	groups := t.groups
	for i, g := range groups {
		fmt.Fprintf(&b, "\tsubgraph %s {\n\t\tlabel=%s;\n\t\tstyle=\"dashed,rounded\";\n",
			label(fmt.Sprintf("cluster_%d", i)), label(g.members[0].location(t.opts.Granularity)))
		for _, m := range g.members {
			t.dotNode(&b, m, warnings[KindNode+":"+m.Name])
		}
		b.WriteString("\t}\n")
	}
	t.dotEdges(&b, groups)
	t.dotPeers(&b, warnings)
	t.dotExcluded(&b)
	b.WriteString("}\n")
	return b.String()
}

func (t *Topology) dotNode(b *strings.Builder, m *member, warnings []string) {
	lines := []string{m.Name}
	leader := t.IsLeader(m.Name)
	if leader && t.opts.Granularity == LocationGranularity {
		lines = append(lines, "leader")
	}
	for _, a := range t.Addresses(m.Name) {
		lines = append(lines, "wireguard "+a.String())
	}
	for _, in := range []netip.Prefix{m.InternalIP, m.InternalIP6} {
		if in.IsValid() {
			lines = append(lines, "internal "+in.String())
		}
	}
	if leader && m.Endpoint != nil {
		lines = append(lines, "endpoint "+endpointString(*m.Endpoint))
		if !m.public {
			lines = append(lines, "no public endpoint (NAT)")
		}
	}
	if leader && m.PersistentKeepalive > 0 {
		lines = append(lines, "keepalive "+m.PersistentKeepalive.String())
	}
	if len(m.PodCIDRs) > 0 {
		lines = append(lines, "pods "+joinPrefixes(m.PodCIDRs))
	}
	if !m.Ready {
		lines = append(lines, "not ready")
	}
	for _, w := range warnings {
		lines = append(lines, "warning: "+w)
	}
	attrs := []string{"label=" + label(lines...)}
	if leader {
		attrs = append(attrs, "peripheries=2")
	}
	if !m.Ready {
		attrs = append(attrs, "style=dashed")
	}
	if len(warnings) > 0 {
		attrs = append(attrs, "color=orange")
	}
	fmt.Fprintf(b, "\t\t%s [%s];\n", label("node/"+m.Name), strings.Join(attrs, ", "))
}

func (t *Topology) dotEdges(b *strings.Builder, groups []group) {
	for i := range t.Segments {
		for j := i + 1; j < len(t.Segments); j++ {
			if remote(&t.Segments[i], &t.Segments[j]) {
				fmt.Fprintf(b, "\t%s -> %s [dir=both, style=bold];\n",
					label("node/"+t.Segments[i].LeaderNode().Name), label("node/"+t.Segments[j].LeaderNode().Name))
			}
		}
	}
	edge := func(a, c *member) {
		attrs := "dir=both, style=dotted"
		if t.encapsulate(a, c) {
			attrs += ", label=" + label("encapsulated")
		}
		fmt.Fprintf(b, "\t%s -> %s [%s];\n", label("node/"+a.Name), label("node/"+c.Name), attrs)
	}
	switch t.opts.Granularity {
	case LocationGranularity:
		for _, s := range t.Segments {
			l := s.members[s.Leader]
			for _, m := range s.members {
				if m != l {
					edge(l, m)
				}
			}
		}
	case CrossGranularity:
		for _, g := range groups {
			for i, m := range g.members {
				for _, o := range g.members[i+1:] {
					edge(m, o)
				}
			}
		}
	}
}

func (t *Topology) dotPeers(b *strings.Builder, warnings map[string][]string) {
	if len(t.Peers) == 0 {
		return
	}
	b.WriteString("\tsubgraph \"cluster_peers\" {\n\t\tlabel=\"peers\";\n\t\tstyle=\"dashed,rounded\";\n")
	for _, p := range t.Peers {
		lines := []string{p.Name, "allowed " + joinPrefixes(p.AllowedIPs)}
		if p.Endpoint != nil {
			lines = append(lines, "endpoint "+endpointString(*p.Endpoint))
		}
		for _, w := range warnings[KindPeer+":"+p.Name] {
			lines = append(lines, "warning: "+w)
		}
		fmt.Fprintf(b, "\t\t%s [label=%s, shape=box];\n", label("peer/"+p.Name), label(lines...))
	}
	b.WriteString("\t}\n")
	for _, s := range t.Segments {
		for _, p := range t.Peers {
			if t.relays(&s, p) {
				continue // reached through the gateway segment
			}
			fmt.Fprintf(b, "\t%s -> %s [dir=both, style=dashed];\n", label("node/"+s.LeaderNode().Name), label("peer/"+p.Name))
		}
	}
}

func (t *Topology) dotExcluded(b *strings.Builder) {
	var lines []string
	for _, p := range t.Problems {
		if p.Severity == Excluded {
			lines = append(lines, fmt.Sprintf("\t\t%s [label=%s, shape=box, color=red];\n",
				label("excluded/"+p.Kind+"/"+p.Name), label(p.Kind+" "+p.Name, "excluded: "+p.Code)))
		}
	}
	if len(lines) == 0 {
		return
	}
	b.WriteString("\tsubgraph \"cluster_excluded\" {\n\t\tlabel=\"excluded\";\n\t\tcolor=red;\n")
	for _, l := range slices.Compact(lines) {
		b.WriteString(l)
	}
	b.WriteString("\t}\n")
}

// label quotes lines as one DOT string, joined by DOT's \n escape.
func label(lines ...string) string {
	esc := make([]string, len(lines))
	for i, l := range lines {
		l = strings.Map(func(r rune) rune {
			if unicode.IsControl(r) {
				return ' '
			}
			return r
		}, strings.ToValidUTF8(l, "\uFFFD"))
		esc[i] = strings.NewReplacer(`\`, `\\`, `"`, `\"`).Replace(l)
	}
	return `"` + strings.Join(esc, `\n`) + `"`
}

func endpointString(e Endpoint) string {
	if e.DNS != "" {
		return fmt.Sprintf("%s:%d", e.DNS, e.Port)
	}
	return netip.AddrPortFrom(e.Addr.Addr(), e.Port).String()
}

func joinPrefixes(ps []netip.Prefix) string {
	s := make([]string, len(ps))
	for i, p := range ps {
		s[i] = p.String()
	}
	return strings.Join(s, ", ")
}
