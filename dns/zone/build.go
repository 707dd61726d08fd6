package zone

import (
	"cmp"
	"net/netip"
	"slices"
	"strings"

	"github.com/miekg/dns"
)

// names maps the names below one service's name (relative, "" for the
// service's own) to their records. An empty rrset is a name that exists with
// no records (an empty non-terminal).
type names map[string]*rrset

type rrset struct {
	rrs map[uint16][]dns.RR
	// extra holds the addresses of the targets of the SRV records.
	extra []dns.RR
}

func (n names) at(rel string) *rrset {
	s := n[rel]
	if s == nil {
		s = &rrset{rrs: map[uint16][]dns.RR{}}
		n[rel] = s
	}
	return s
}

// target is one SRV target: a name and its addresses.
type target struct {
	rel   string // relative to the service's name
	addrs []netip.Addr
}

// build computes the records of one service, or nil if it has none: a
// ClusterSetIP import without IPs or a Headless import without a ready
// endpoint is not served (NXDOMAIN).
func build(imp Import, sl []Slice, ttl uint32) names {
	fq := strings.ToLower(imp.Name + "." + imp.Namespace + ".svc." + Origin)
	n := names{}
	var targets []target
	if imp.Headless {
		targets = endpoints(sl)
		if len(targets) == 0 {
			return nil
		}
		svc := n.at("")
		seen := map[netip.Addr]bool{}
		for _, t := range targets {
			addAddrs(n.at(t.rel), fq, t.rel, t.addrs, ttl)
			for _, a := range t.addrs {
				if !seen[a] {
					seen[a] = true
					addAddrs(svc, fq, "", []netip.Addr{a}, ttl)
				}
			}
		}
	} else {
		if len(imp.IPs) == 0 {
			return nil
		}
		addAddrs(n.at(""), fq, "", imp.IPs, ttl)
		targets = []target{{rel: "", addrs: imp.IPs}}
	}
	addSRVs(n, imp.Ports, targets, fq, ttl)
	// <clusterid>.<svc>.<ns> has no records, but the name exists.
	for _, s := range sl {
		if c := strings.ToLower(s.Cluster); isLabel(c) {
			n.at(c)
		}
	}
	return n
}

// endpoints returns one target per ready endpoint name (hostname.clusterid)
// of the slices, with every address of that name, sorted by name.
func endpoints(sl []Slice) []target {
	byName := map[string][]netip.Addr{}
	for _, s := range sl {
		cluster := strings.ToLower(s.Cluster)
		if !isLabel(cluster) {
			continue
		}
		for _, ep := range s.Endpoints {
			if !ep.Ready || len(ep.Addresses) == 0 {
				continue
			}
			host := strings.ToLower(ep.Hostname)
			if host == "" {
				host = AddressLabel(ep.Addresses[0].Unmap().String())
			}
			if !isLabel(host) {
				continue
			}
			rel := host + "." + cluster
			for _, a := range ep.Addresses {
				if a = a.Unmap(); a.IsValid() && !slices.Contains(byName[rel], a) {
					byName[rel] = append(byName[rel], a)
				}
			}
		}
	}
	var out []target
	for rel, addrs := range byName {
		slices.SortFunc(addrs, netip.Addr.Compare)
		out = append(out, target{rel: rel, addrs: addrs})
	}
	slices.SortFunc(out, func(a, b target) int { return cmp.Compare(a.rel, b.rel) })
	return out
}

// addSRVs adds, for every port, an SRV per target at the service's own name
// (one per distinct port number and target) and, for named ports, at
// _<port>._<proto>.
func addSRVs(n names, ports []Port, targets []target, fq string, ttl uint32) {
	if len(ports) == 0 {
		return
	}
	weight := uint16(max(1, 100/len(targets)))
	type bare struct {
		port uint16
		rel  string
	}
	seen := map[bare]bool{}
	for _, p := range ports {
		named := ""
		if name, proto := strings.ToLower(p.Name), protocol(p.Protocol); name != "" && isLabel("_"+name) && proto != "" {
			named = "_" + name + "." + proto
			n.at(proto)
		}
		for _, t := range targets {
			srv := func(owner string) *dns.SRV {
				return &dns.SRV{
					Hdr:    dns.RR_Header{Name: join(owner, fq), Rrtype: dns.TypeSRV, Class: dns.ClassINET, Ttl: ttl},
					Weight: weight, Port: p.Port, Target: join(t.rel, fq),
				}
			}
			if b := (bare{p.Port, t.rel}); !seen[b] {
				seen[b] = true
				s := n.at("")
				s.rrs[dns.TypeSRV] = append(s.rrs[dns.TypeSRV], srv(""))
			}
			if named != "" {
				s := n.at(named)
				s.rrs[dns.TypeSRV] = append(s.rrs[dns.TypeSRV], srv(named))
			}
		}
	}
	var extra []dns.RR
	for _, t := range targets {
		at := n[t.rel]
		extra = append(append(extra, at.rrs[dns.TypeA]...), at.rrs[dns.TypeAAAA]...)
	}
	for _, s := range n {
		if len(s.rrs[dns.TypeSRV]) > 0 {
			s.extra = extra
		}
	}
}

func addAddrs(s *rrset, fq, rel string, addrs []netip.Addr, ttl uint32) {
	for _, a := range addrs {
		a = a.Unmap()
		hdr := dns.RR_Header{Name: join(rel, fq), Class: dns.ClassINET, Ttl: ttl}
		switch {
		case a.Is4():
			hdr.Rrtype = dns.TypeA
			s.rrs[dns.TypeA] = append(s.rrs[dns.TypeA], &dns.A{Hdr: hdr, A: a.AsSlice()})
		case a.Is6():
			hdr.Rrtype = dns.TypeAAAA
			s.rrs[dns.TypeAAAA] = append(s.rrs[dns.TypeAAAA], &dns.AAAA{Hdr: hdr, AAAA: a.AsSlice()})
		}
	}
}

func join(rel, fq string) string {
	if rel == "" {
		return fq
	}
	return rel + "." + fq
}

func protocol(p string) string {
	switch strings.ToUpper(p) {
	case "", "TCP":
		return "_tcp"
	case "UDP":
		return "_udp"
	case "SCTP":
		return "_sctp"
	}
	return ""
}

// isLabel reports whether s is one DNS label of letters, digits, dashes and
// underscores.
func isLabel(s string) bool {
	if s == "" || len(s) > 63 {
		return false
	}
	for _, c := range []byte(s) {
		if !('a' <= c && c <= 'z' || '0' <= c && c <= '9' || c == '-' || c == '_') {
			return false
		}
	}
	return true
}
