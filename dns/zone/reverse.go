package zone

import (
	"net/netip"
	"strconv"
	"strings"

	"github.com/miekg/dns"
)

// LookupReverse answers a PTR (or ANY) question for the reverse name
// (in-addr.arpa or ip6.arpa) of a ready endpoint address of a Headless
// import, with that endpoint's <hostname>.<clusterid> name, and reports
// whether it did. Every other question, including the reverse names of
// clusterset IPs (whose derived Service already has a PTR in the cluster
// DNS), is not the zone's: the caller forwards it.
func (z *Zone) LookupReverse(name string, qtype uint16) (Result, bool) {
	if qtype != dns.TypePTR && qtype != dns.TypeANY {
		return Result{}, false
	}
	name = dns.Fqdn(strings.ToLower(name))
	a, ok := reverseAddr(name)
	if !ok {
		return Result{}, false
	}
	z.mu.RLock()
	defer z.mu.RUnlock()
	target := ""
	for _, n := range z.reverse[a] {
		if target == "" || n < target {
			target = n
		}
	}
	if target == "" {
		return Result{}, false
	}
	return Result{Rcode: dns.RcodeSuccess, Answer: []dns.RR{&dns.PTR{
		Hdr: dns.RR_Header{Name: name, Rrtype: dns.TypePTR, Class: dns.ClassINET, Ttl: z.ttl},
		Ptr: target,
	}}}, true
}

// reverseAddr parses a reverse name of exactly one address.
func reverseAddr(name string) (netip.Addr, bool) {
	if rest, ok := strings.CutSuffix(name, ".in-addr.arpa."); ok {
		labels := strings.Split(rest, ".")
		if len(labels) != 4 {
			return netip.Addr{}, false
		}
		var b [4]byte
		for i, l := range labels {
			v, err := strconv.ParseUint(l, 10, 8)
			if err != nil || (len(l) > 1 && l[0] == '0') {
				return netip.Addr{}, false
			}
			b[3-i] = byte(v)
		}
		return netip.AddrFrom4(b), true
	}
	if rest, ok := strings.CutSuffix(name, ".ip6.arpa."); ok {
		labels := strings.Split(rest, ".")
		if len(labels) != 32 {
			return netip.Addr{}, false
		}
		var b [16]byte
		for i, l := range labels {
			v, err := strconv.ParseUint(l, 16, 4)
			if err != nil || len(l) != 1 {
				return netip.Addr{}, false
			}
			n := 31 - i // nibble index from the most significant
			b[n/2] |= byte(v) << (4 * (1 - n%2))
		}
		return netip.AddrFrom16(b), true
	}
	return netip.Addr{}, false
}

// ptrs returns the per-endpoint names of a service's records by address:
// every name below the service's own, other than _<port>._<proto>, that has
// addresses.
func ptrs(n names) map[netip.Addr]string {
	out := map[netip.Addr]string{}
	for rel, s := range n {
		if rel == "" || strings.HasPrefix(rel, "_") {
			continue
		}
		for _, rr := range append(append([]dns.RR{}, s.rrs[dns.TypeA]...), s.rrs[dns.TypeAAAA]...) {
			var a netip.Addr
			switch rr := rr.(type) {
			case *dns.A:
				a, _ = netip.AddrFromSlice(rr.A.To4())
			case *dns.AAAA:
				a, _ = netip.AddrFromSlice(rr.AAAA.To16())
			}
			if old, ok := out[a]; !ok || rr.Header().Name < old {
				out[a] = rr.Header().Name
			}
		}
	}
	return out
}
