package zone

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/miekg/dns"
)

func TestLookupReverseNamesHeadlessEndpoints(t *testing.T) {
	const db = "db.prod.svc.clusterset.local."
	rev := func(ip string) string {
		r, err := dns.ReverseAddr(ip)
		if err != nil {
			t.Fatal(err)
		}
		return r
	}
	for _, tc := range []struct {
		name  string
		qname string
		qtype uint16
		want  []string // nil: not the zone's
	}{
		{"IPv4 endpoint with a hostname", rev("10.1.0.7"), dns.TypePTR, []string{rev("10.1.0.7") + " 5 IN PTR db-0.a." + db}},
		{"IPv4 endpoint without one", rev("10.2.0.9"), dns.TypePTR, []string{rev("10.2.0.9") + " 5 IN PTR 10-2-0-9.b." + db}},
		{"IPv6 endpoint", rev("fd00:2::9"), dns.TypePTR, []string{rev("fd00:2::9") + " 5 IN PTR fd00-2--9.b." + db}},
		{"any case", "7.0.1.10.IN-ADDR.ARPA", dns.TypePTR, []string{"7.0.1.10.in-addr.arpa. 5 IN PTR db-0.a." + db}},
		{"ANY", rev("10.1.0.7"), dns.TypeANY, []string{rev("10.1.0.7") + " 5 IN PTR db-0.a." + db}},
		{"endpoint not ready", rev("10.1.0.8"), dns.TypePTR, nil},
		{"clusterset IP: the cluster DNS has its PTR", rev("10.96.0.10"), dns.TypePTR, nil},
		{"ClusterSetIP import's endpoints", rev("10.1.0.5"), dns.TypePTR, nil},
		{"unknown address", rev("192.0.2.1"), dns.TypePTR, nil},
		{"known address, other type", rev("10.1.0.7"), dns.TypeA, nil},
		{"a reverse zone, not an address", "1.10.in-addr.arpa.", dns.TypePTR, nil},
		{"leading zero", "07.0.1.10.in-addr.arpa.", dns.TypePTR, nil},
		{"not a reverse name", "example.com.", dns.TypePTR, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r, ok := fixture().LookupReverse(tc.qname, tc.qtype)
			var got []string
			if ok {
				got = text(r).Answer
			}
			if d := cmp.Diff(tc.want, got); d != "" {
				t.Errorf("LookupReverse(%s, %s) (-want +got):\n%s", tc.qname, dns.TypeToString[tc.qtype], d)
			}
		})
	}
}

func TestReverseNamesFollowTheEndpoints(t *testing.T) {
	z := fixture()
	ptr := func() bool { _, ok := z.LookupReverse("7.0.1.10.in-addr.arpa.", dns.TypePTR); return ok }
	if !ptr() {
		t.Fatal("no PTR for a ready endpoint")
	}
	z.SetSlice(Slice{Namespace: "prod", Name: "db-a", Service: "db", Cluster: "a", Endpoints: []Endpoint{{Hostname: "db-0", Addresses: addrs("10.1.0.7")}}})
	if ptr() {
		t.Error("PTR left after the endpoint went not ready")
	}
	z.SetSlice(Slice{Namespace: "prod", Name: "db-a", Service: "db", Cluster: "a", Endpoints: []Endpoint{ready("db-0", "10.1.0.7")}})
	if !ptr() {
		t.Error("no PTR once ready again")
	}
	z.DeleteImport("prod", "db")
	if ptr() || len(z.reverse) != 0 {
		t.Errorf("PTR left after the import went: %v", z.reverse)
	}
}
