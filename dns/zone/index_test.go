package zone

import (
	"fmt"
	"sync"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/miekg/dns"
)

// TestIndexFollowsImportsAndSlices applies a sequence of changes to a zone
// and checks, after each, what the names answer.
func TestIndexFollowsImportsAndSlices(t *testing.T) {
	const name = "db.prod.svc.clusterset.local."
	z := New(Config{})
	a := func(qname string) []string {
		var out []string
		r := z.Lookup(qname, dns.TypeA)
		if r.Rcode != dns.RcodeSuccess {
			return []string{dns.RcodeToString[r.Rcode]}
		}
		for _, rr := range r.Answer {
			out = append(out, rr.(*dns.A).A.String())
		}
		return out
	}
	for _, step := range []struct {
		name   string
		change func(z *Zone)
		qname  string
		want   []string
	}{
		{"a slice without its import is not served", func(z *Zone) {
			z.SetSlice(Slice{Namespace: "prod", Name: "s1", Service: "db", Cluster: "a", Endpoints: []Endpoint{ready("db-0", "10.1.0.7")}})
		}, name, []string{"NXDOMAIN"}},
		{"the import arrives", func(z *Zone) {
			z.SetImport(Import{Namespace: "prod", Name: "db", Headless: true})
		}, name, []string{"10.1.0.7"}},
		{"a second slice from another cluster", func(z *Zone) {
			z.SetSlice(Slice{Namespace: "prod", Name: "s2", Service: "db", Cluster: "b", Endpoints: []Endpoint{ready("db-0", "10.2.0.7")}})
		}, name, []string{"10.1.0.7", "10.2.0.7"}},
		{"its per-pod name", nil, "db-0.b." + name, []string{"10.2.0.7"}},
		{"an endpoint goes not ready", func(z *Zone) {
			z.SetSlice(Slice{Namespace: "prod", Name: "s1", Service: "db", Cluster: "a", Endpoints: []Endpoint{{Hostname: "db-0", Addresses: addrs("10.1.0.7")}}})
		}, name, []string{"10.2.0.7"}},
		{"and its per-pod name goes", nil, "db-0.a." + name, []string{"NXDOMAIN"}},
		{"a slice relabelled to another service leaves this one", func(z *Zone) {
			z.SetSlice(Slice{Namespace: "prod", Name: "s2", Service: "other", Cluster: "b", Endpoints: []Endpoint{ready("db-0", "10.2.0.7")}})
		}, name, []string{"NXDOMAIN"}},
		{"the namespace has no served service left", nil, "prod.svc.clusterset.local.", []string{"NXDOMAIN"}},
		{"the slice comes back ready", func(z *Zone) {
			z.SetSlice(Slice{Namespace: "prod", Name: "s1", Service: "db", Cluster: "a", Endpoints: []Endpoint{ready("db-0", "10.1.0.7")}})
		}, name, []string{"10.1.0.7"}},
		{"the namespace exists again", nil, "prod.svc.clusterset.local.", nil},
		{"the import turns ClusterSetIP", func(z *Zone) {
			z.SetImport(Import{Namespace: "prod", Name: "db", IPs: addrs("10.96.0.9")})
		}, name, []string{"10.96.0.9"}},
		{"no per-pod names for a ClusterSetIP import", nil, "db-0.a." + name, []string{"NXDOMAIN"}},
		{"a ClusterSetIP import without IPs is not served", func(z *Zone) {
			z.SetImport(Import{Namespace: "prod", Name: "db"})
		}, name, []string{"NXDOMAIN"}},
		{"IPs assigned", func(z *Zone) {
			z.SetImport(Import{Namespace: "prod", Name: "db", IPs: addrs("10.96.0.9")})
		}, name, []string{"10.96.0.9"}},
		{"the import is deleted", func(z *Zone) { z.DeleteImport("prod", "db") }, name, []string{"NXDOMAIN"}},
		{"its slices no longer count", func(z *Zone) {
			z.SetImport(Import{Namespace: "prod", Name: "db", Headless: true})
			z.DeleteSlice("prod", "s1")
		}, name, []string{"NXDOMAIN"}},
		{"deleting what is not there changes nothing", func(z *Zone) {
			z.DeleteSlice("prod", "nope")
			z.DeleteImport("prod", "nope")
		}, "dns-version.clusterset.local.", nil},
	} {
		if step.change != nil {
			step.change(z)
		}
		if d := cmp.Diff(step.want, a(step.qname)); d != "" {
			t.Fatalf("%s: %s A (-want +got):\n%s", step.name, step.qname, d)
		}
	}
	if n := z.Services(); n != 0 {
		t.Errorf("Services() = %d at the end, want 0", n)
	}
}

// TestLookupWhileUpdating runs lookups and updates at once (for -race).
func TestLookupWhileUpdating(t *testing.T) {
	z := New(Config{TTL: 1})
	var wg sync.WaitGroup
	wg.Add(2)
	go func() {
		defer wg.Done()
		for i := range 500 {
			z.SetImport(Import{Namespace: "ns", Name: fmt.Sprint("s", i%7), IPs: addrs(fmt.Sprintf("10.0.0.%d", i%250+1)),
				Ports: []Port{{Name: "p", Port: 1}}})
			z.SetSlice(Slice{Namespace: "ns", Name: fmt.Sprint("e", i%5), Service: fmt.Sprint("s", i%7), Cluster: "c"})
			if i%3 == 0 {
				z.DeleteImport("ns", fmt.Sprint("s", i%7))
			}
		}
	}()
	go func() {
		defer wg.Done()
		for i := range 500 {
			r := z.Lookup(fmt.Sprintf("_p._tcp.s%d.ns.svc.clusterset.local.", i%7), dns.TypeSRV)
			for _, rr := range append(r.Answer, r.Extra...) {
				_ = rr.String()
			}
		}
	}()
	wg.Wait()
}
