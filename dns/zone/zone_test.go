package zone

import (
	"net/netip"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/miekg/dns"
)

// answer is a Result in text: the rcode, then each section's records in
// presentation form, sorted.
type answer struct {
	Rcode  string
	Answer []string
	Extra  []string
	SOA    bool
}

func text(r Result) answer {
	a := answer{Rcode: dns.RcodeToString[r.Rcode], SOA: len(r.Ns) == 1 && r.Ns[0].Header().Rrtype == dns.TypeSOA}
	for _, rr := range r.Answer {
		a.Answer = append(a.Answer, strings.ReplaceAll(rr.String(), "\t", " "))
	}
	for _, rr := range r.Extra {
		a.Extra = append(a.Extra, strings.ReplaceAll(rr.String(), "\t", " "))
	}
	slices.Sort(a.Answer)
	slices.Sort(a.Extra)
	return a
}

func addrs(s ...string) []netip.Addr {
	var out []netip.Addr
	for _, a := range s {
		out = append(out, netip.MustParseAddr(a))
	}
	return out
}

func ready(host string, a ...string) Endpoint {
	return Endpoint{Hostname: host, Addresses: addrs(a...), Ready: true}
}

// fixture is a zone with a dual-stack ClusterSetIP import "web" (two named
// ports and an unnamed one) backed by clusters a and b, and a Headless
// import "db" with ready pods in clusters a and b and one pod not ready.
func fixture() *Zone {
	z := New(Config{})
	z.SetImport(Import{Namespace: "prod", Name: "web", IPs: addrs("10.96.0.10", "fd00::10"), Ports: []Port{
		{Name: "http", Protocol: "TCP", Port: 80}, {Name: "dns", Protocol: "UDP", Port: 53}, {Port: 9000},
	}})
	z.SetSlice(Slice{Namespace: "prod", Name: "web-a", Service: "web", Cluster: "a", Endpoints: []Endpoint{ready("", "10.1.0.5")}})
	z.SetSlice(Slice{Namespace: "prod", Name: "web-b", Service: "web", Cluster: "b", Endpoints: []Endpoint{ready("", "10.2.0.5")}})
	z.SetImport(Import{Namespace: "prod", Name: "db", Headless: true, Ports: []Port{
		{Name: "pg", Protocol: "TCP", Port: 5432}, {Name: "pg-udp", Protocol: "UDP", Port: 5432},
	}})
	z.SetSlice(Slice{Namespace: "prod", Name: "db-a", Service: "db", Cluster: "a", Endpoints: []Endpoint{
		ready("db-0", "10.1.0.7"), {Hostname: "db-1", Addresses: addrs("10.1.0.8"), Ready: false},
	}})
	z.SetSlice(Slice{Namespace: "prod", Name: "db-b", Service: "db", Cluster: "b", Endpoints: []Endpoint{ready("", "10.2.0.9")}})
	z.SetSlice(Slice{Namespace: "prod", Name: "db-b6", Service: "db", Cluster: "b", Endpoints: []Endpoint{ready("", "fd00:2::9")}})
	return z
}

func TestLookupAnswersTheMCSRecords(t *testing.T) {
	const web, db = "web.prod.svc.clusterset.local.", "db.prod.svc.clusterset.local."
	soa := answer{Rcode: "NOERROR", SOA: true}
	nx := answer{Rcode: "NXDOMAIN", SOA: true}
	webAddrs := []string{web + " 5 IN A 10.96.0.10", web + " 5 IN AAAA fd00::10"}
	dbTargets := []string{
		"10-2-0-9.b." + db + " 5 IN A 10.2.0.9",
		"db-0.a." + db + " 5 IN A 10.1.0.7",
		"fd00-2--9.b." + db + " 5 IN AAAA fd00:2::9",
	}
	for _, tc := range []struct {
		name  string
		qname string
		qtype uint16
		want  answer
	}{
		{"clusterset IP, A", web, dns.TypeA, answer{Rcode: "NOERROR", Answer: []string{web + " 5 IN A 10.96.0.10"}}},
		{"clusterset IP, AAAA", web, dns.TypeAAAA, answer{Rcode: "NOERROR", Answer: []string{web + " 5 IN AAAA fd00::10"}}},
		{"name in any case, without the final dot", "WEB.Prod.svc.ClusterSet.local", dns.TypeA, answer{Rcode: "NOERROR", Answer: []string{web + " 5 IN A 10.96.0.10"}}},
		{"named TCP port SRV", "_http._tcp." + web, dns.TypeSRV, answer{Rcode: "NOERROR",
			Answer: []string{"_http._tcp." + web + " 5 IN SRV 0 100 80 " + web}, Extra: webAddrs}},
		{"named UDP port SRV", "_dns._udp." + web, dns.TypeSRV, answer{Rcode: "NOERROR",
			Answer: []string{"_dns._udp." + web + " 5 IN SRV 0 100 53 " + web}, Extra: webAddrs}},
		{"named port under the wrong protocol", "_http._udp." + web, dns.TypeSRV, nx},
		{"bare service name SRV lists every port", web, dns.TypeSRV, answer{Rcode: "NOERROR", Answer: []string{
			web + " 5 IN SRV 0 100 53 " + web, web + " 5 IN SRV 0 100 80 " + web, web + " 5 IN SRV 0 100 9000 " + web,
		}, Extra: webAddrs}},
		{"protocol label is an empty non-terminal", "_tcp." + web, dns.TypeSRV, soa},
		{"clusterid of a clusterset IP service has no record", "a." + web, dns.TypeA, soa},
		{"unknown cluster of a clusterset IP service", "c." + web, dns.TypeA, nx},
		{"clusterset IP service, type it has not", web, dns.TypeTXT, soa},
		{"unknown type", web, 65280, soa},
		{"ANY", web, dns.TypeANY, answer{Rcode: "NOERROR", Answer: []string{
			web + " 5 IN A 10.96.0.10", web + " 5 IN AAAA fd00::10",
			web + " 5 IN SRV 0 100 53 " + web, web + " 5 IN SRV 0 100 80 " + web, web + " 5 IN SRV 0 100 9000 " + web,
		}, Extra: webAddrs}},

		{"headless A: every ready IPv4 endpoint", db, dns.TypeA, answer{Rcode: "NOERROR", Answer: []string{
			db + " 5 IN A 10.1.0.7", db + " 5 IN A 10.2.0.9"}}},
		{"headless AAAA", db, dns.TypeAAAA, answer{Rcode: "NOERROR", Answer: []string{db + " 5 IN AAAA fd00:2::9"}}},
		{"headless per-pod name by hostname", "db-0.a." + db, dns.TypeA, answer{Rcode: "NOERROR", Answer: []string{"db-0.a." + db + " 5 IN A 10.1.0.7"}}},
		{"headless per-pod name by dashed address", "10-2-0-9.b." + db, dns.TypeA, answer{Rcode: "NOERROR", Answer: []string{"10-2-0-9.b." + db + " 5 IN A 10.2.0.9"}}},
		{"headless per-pod name, other family", "db-0.a." + db, dns.TypeAAAA, soa},
		{"pod not ready has no name", "db-1.a." + db, dns.TypeA, nx},
		{"pod in the other cluster", "db-0.b." + db, dns.TypeA, nx},
		{"clusterid of a headless service has no record", "a." + db, dns.TypeA, soa},
		{"headless named port SRV: one per ready endpoint", "_pg._tcp." + db, dns.TypeSRV, answer{Rcode: "NOERROR", Answer: []string{
			"_pg._tcp." + db + " 5 IN SRV 0 33 5432 10-2-0-9.b." + db,
			"_pg._tcp." + db + " 5 IN SRV 0 33 5432 db-0.a." + db,
			"_pg._tcp." + db + " 5 IN SRV 0 33 5432 fd00-2--9.b." + db,
		}, Extra: dbTargets}},
		{"headless bare SRV: one per endpoint and port number", db, dns.TypeSRV, answer{Rcode: "NOERROR", Answer: []string{
			db + " 5 IN SRV 0 33 5432 10-2-0-9.b." + db,
			db + " 5 IN SRV 0 33 5432 db-0.a." + db,
			db + " 5 IN SRV 0 33 5432 fd00-2--9.b." + db,
		}, Extra: dbTargets}},

		{"schema version", "dns-version.clusterset.local.", dns.TypeTXT, answer{Rcode: "NOERROR", Answer: []string{`dns-version.clusterset.local. 28800 IN TXT "1.0.0"`}}},
		{"schema version, other type", "dns-version.clusterset.local.", dns.TypeA, soa},
		{"apex SOA", "clusterset.local.", dns.TypeSOA, answer{Rcode: "NOERROR", Answer: []string{
			"clusterset.local. 5 IN SOA ns.dns.clusterset.local. hostmaster.clusterset.local. 8 7200 1800 86400 5"}}},
		{"apex A", "clusterset.local.", dns.TypeA, soa},
		{"svc is an empty non-terminal", "svc.clusterset.local.", dns.TypeA, soa},
		{"a namespace with imports is an empty non-terminal", "prod.svc.clusterset.local.", dns.TypeA, soa},
		{"namespace without imports", "dev.svc.clusterset.local.", dns.TypeA, nx},
		{"service not exported", "api.prod.svc.clusterset.local.", dns.TypeA, nx},
		{"same service name, other namespace", "web.dev.svc.clusterset.local.", dns.TypeA, nx},
		{"name outside the svc subtree", "web.prod.pod.clusterset.local.", dns.TypeA, nx},
		{"deeper than any name", "x.db-0.a." + db, dns.TypeA, nx},
		{"name outside the zone", "example.com.", dns.TypeA, answer{Rcode: "REFUSED"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := text(fixture().Lookup(tc.qname, tc.qtype))
			if d := cmp.Diff(tc.want, got); d != "" {
				t.Errorf("Lookup(%s, %s) (-want +got):\n%s", tc.qname, dns.TypeToString[tc.qtype], d)
			}
		})
	}
}
