package zone

import (
	"strings"

	"github.com/miekg/dns"
)

// Result is the zone's answer to one question.
type Result struct {
	// Rcode is dns.RcodeSuccess (with an empty Answer for NODATA) or
	// dns.RcodeNameError (NXDOMAIN).
	Rcode int
	// Answer holds the records of the name and type asked for.
	Answer []dns.RR
	// Ns holds the zone's SOA in a negative answer (NXDOMAIN or NODATA).
	Ns []dns.RR
	// Extra holds the addresses of SRV targets.
	Extra []dns.RR
}

// Lookup answers the question for name (any case, below Origin) and qtype;
// dns.TypeANY returns every record of the name. The records returned are
// shared: callers must not modify them.
func (z *Zone) Lookup(name string, qtype uint16) Result {
	name = dns.Fqdn(strings.ToLower(name))
	if !dns.IsSubDomain(Origin, name) {
		return Result{Rcode: dns.RcodeRefused}
	}
	rel := strings.TrimSuffix(strings.TrimSuffix(name, Origin), ".")
	var labels []string
	if rel != "" {
		labels = strings.Split(rel, ".")
	}
	z.mu.RLock()
	defer z.mu.RUnlock()
	var set *rrset
	switch n := len(labels); {
	case n == 0:
		set = &rrset{rrs: map[uint16][]dns.RR{dns.TypeSOA: {z.soa()}}}
	case n == 1 && labels[0] == "dns-version":
		set = &rrset{rrs: map[uint16][]dns.RR{dns.TypeTXT: {&dns.TXT{
			Hdr: dns.RR_Header{Name: "dns-version." + Origin, Rrtype: dns.TypeTXT, Class: dns.ClassINET, Ttl: VersionTTL},
			Txt: []string{SchemaVersion},
		}}}}
	case labels[n-1] != "svc":
	case n == 1:
		if len(z.served) > 0 {
			set = &rrset{}
		}
	case n == 2:
		if z.namespaces[labels[0]] > 0 {
			set = &rrset{}
		}
	default:
		if names := z.served[svcKey{labels[n-2], labels[n-3]}]; names != nil {
			set = names[strings.Join(labels[:n-3], ".")]
		}
	}
	if set == nil {
		return Result{Rcode: dns.RcodeNameError, Ns: []dns.RR{z.soa()}}
	}
	var r Result
	if qtype == dns.TypeANY {
		for _, t := range []uint16{dns.TypeSOA, dns.TypeA, dns.TypeAAAA, dns.TypeSRV, dns.TypeTXT} {
			r.Answer = append(r.Answer, set.rrs[t]...)
		}
	} else {
		r.Answer = set.rrs[qtype]
	}
	if len(r.Answer) == 0 {
		return Result{Rcode: dns.RcodeSuccess, Ns: []dns.RR{z.soa()}}
	}
	if qtype == dns.TypeSRV || qtype == dns.TypeANY {
		r.Extra = set.extra
	}
	return r
}

// soa is the zone's SOA record; its minimum is the negative-answer TTL.
func (z *Zone) soa() dns.RR {
	return &dns.SOA{
		Hdr:     dns.RR_Header{Name: Origin, Rrtype: dns.TypeSOA, Class: dns.ClassINET, Ttl: z.ttl},
		Ns:      "ns.dns." + Origin,
		Mbox:    "hostmaster." + Origin,
		Serial:  z.serial,
		Refresh: 7200,
		Retry:   1800,
		Expire:  86400,
		Minttl:  z.ttl,
	}
}
