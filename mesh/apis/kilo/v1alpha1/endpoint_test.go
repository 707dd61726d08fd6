package v1alpha1

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestEndpointJSON(t *testing.T) {
	for _, tc := range []struct {
		name    string
		in      string
		want    DNSOrIP
		port    uint32
		invalid string // substring of Validate's error; empty if valid
		out     string // MarshalJSON of the decoded value
	}{
		{
			name: "seed string form with DNS name",
			in:   `"dr-gateway.example.com:51820"`,
			want: DNSOrIP{DNS: "dr-gateway.example.com"}, port: 51820,
			out: `"dr-gateway.example.com:51820"`,
		},
		{
			name: "string form with IPv4",
			in:   `"203.0.113.7:51820"`,
			want: DNSOrIP{IP: "203.0.113.7"}, port: 51820,
			out: `"203.0.113.7:51820"`,
		},
		{
			name: "string form with bracketed IPv6",
			in:   `"[2001:db8::7]:4000"`,
			want: DNSOrIP{IP: "2001:db8::7"}, port: 4000,
			out: `"[2001:db8::7]:4000"`,
		},
		{
			name: "string form with FQDN dot and capitals",
			in:   `"GW.Example.com.:51820"`,
			want: DNSOrIP{DNS: "GW.Example.com."}, port: 51820,
			out: `"GW.Example.com.:51820"`,
		},
		{
			name: "Kilo object form with DNS",
			in:   `{"dnsOrIP":{"dns":"gw.example.com"},"port":51820}`,
			want: DNSOrIP{DNS: "gw.example.com"}, port: 51820,
			out: `{"dnsOrIP":{"dns":"gw.example.com"},"port":51820}`,
		},
		{
			name: "Kilo object form with IP",
			in:   `{"dnsOrIP": {"ip": "203.0.113.7"}, "port": 51821}`,
			want: DNSOrIP{IP: "203.0.113.7"}, port: 51821,
			out: `{"dnsOrIP":{"ip":"203.0.113.7"},"port":51821}`,
		},
		{
			name: "object form with both: kept, DNS wins later",
			in:   `{"dnsOrIP":{"dns":"gw.example.com","ip":"203.0.113.7"},"port":1}`,
			want: DNSOrIP{DNS: "gw.example.com", IP: "203.0.113.7"}, port: 1,
			out: `{"dnsOrIP":{"dns":"gw.example.com","ip":"203.0.113.7"},"port":1}`,
		},
		{
			name:    "string without port",
			in:      `"dr-gateway.example.com"`,
			invalid: `not host:port`,
			out:     `"dr-gateway.example.com"`,
		},
		{
			name:    "string with port 0",
			in:      `"gw.example.com:0"`,
			invalid: `port "0" is not a number from 1 to 65535`,
			out:     `"gw.example.com:0"`,
		},
		{
			name:    "string with a bad host",
			in:      `"gw_1.example.com:51820"`,
			invalid: `host "gw_1.example.com" is neither an IP address nor a DNS name`,
			out:     `"gw_1.example.com:51820"`,
		},
		{
			name:    "empty string",
			in:      `""`,
			invalid: `not host:port`,
			out:     `""`,
		},
		{
			name:    "number",
			in:      `51820`,
			invalid: `write it as "host:port"`,
			out:     `51820`,
		},
		{
			name:    "object with a string port",
			in:      `{"dnsOrIP":{"dns":"gw.example.com"},"port":"51820"}`,
			invalid: `cannot unmarshal string`,
			out:     `{"dnsOrIP":{"dns":"gw.example.com"},"port":"51820"}`,
		},
		{
			name:    "object with port out of range",
			in:      `{"dnsOrIP":{"ip":"203.0.113.7"},"port":70000}`,
			invalid: `port 70000 is not a number from 1 to 65535`,
			out:     `{"dnsOrIP":{"ip":"203.0.113.7"},"port":70000}`,
		},
		{
			name:    "object without dnsOrIP",
			in:      `{"port":51820}`,
			port:    51820,
			invalid: `neither dnsOrIP.dns nor dnsOrIP.ip is set`,
			out:     `{"dnsOrIP":{},"port":51820}`,
		},
		{
			name:    "object with a bad IP",
			in:      `{"dnsOrIP":{"ip":"203.0.113.300"},"port":51820}`,
			want:    DNSOrIP{IP: "203.0.113.300"},
			port:    51820,
			invalid: `dnsOrIP.ip "203.0.113.300" is not an IP address`,
			out:     `{"dnsOrIP":{"ip":"203.0.113.300"},"port":51820}`,
		},
		{
			name:    "object without port",
			in:      `{"dnsOrIP":{"dns":"gw.example.com"}}`,
			want:    DNSOrIP{DNS: "gw.example.com"},
			invalid: `port 0 is not a number from 1 to 65535`,
			out:     `{"dnsOrIP":{"dns":"gw.example.com"},"port":0}`,
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var e PeerEndpoint
			if err := json.Unmarshal([]byte(tc.in), &e); err != nil {
				t.Fatalf("Unmarshal(%s) = %v, want no error ever", tc.in, err)
			}
			if diff := cmp.Diff(tc.want, e.DNSOrIP); diff != "" {
				t.Errorf("DNSOrIP (-want +got):\n%s", diff)
			}
			if e.Port != tc.port {
				t.Errorf("Port = %d, want %d", e.Port, tc.port)
			}
			err := e.Validate()
			switch {
			case tc.invalid == "" && err != nil:
				t.Errorf("Validate() = %v, want nil", err)
			case tc.invalid != "" && (err == nil || !strings.Contains(err.Error(), tc.invalid)):
				t.Errorf("Validate() = %v, want an error containing %q", err, tc.invalid)
			case tc.invalid != "" && !errors.Is(err, ErrInvalidEndpoint):
				t.Errorf("Validate() = %v, want it to wrap ErrInvalidEndpoint", err)
			}
			out, err := json.Marshal(&e)
			if err != nil {
				t.Fatalf("Marshal: %v", err)
			}
			if string(out) != tc.out {
				t.Errorf("Marshal = %s, want %s", out, tc.out)
			}
		})
	}
}

// TestEndpointChangedIsObjectForm checks that a string-form endpoint changed in
// Go is written back in the object form, and that a nested Peer round-trips.
func TestEndpointChangedIsObjectForm(t *testing.T) {
	var p Peer
	in := `{"spec":{"allowedIPs":["10.11.0.0/16"],"publicKey":"k","endpoint":"dr-gateway.example.com:51820"}}`
	if err := json.Unmarshal([]byte(in), &p); err != nil {
		t.Fatal(err)
	}
	out, _ := json.Marshal(p.Spec.Endpoint)
	if got, want := string(out), `"dr-gateway.example.com:51820"`; got != want {
		t.Errorf("unchanged: Marshal = %s, want %s", got, want)
	}
	c := p.DeepCopy()
	c.Spec.Endpoint.Port = 51821
	out, _ = json.Marshal(c.Spec.Endpoint)
	if got, want := string(out), `{"dnsOrIP":{"dns":"dr-gateway.example.com"},"port":51821}`; got != want {
		t.Errorf("changed: Marshal = %s, want %s", got, want)
	}
	if got := p.Spec.Endpoint.Port; got != 51820 {
		t.Errorf("DeepCopy shares the endpoint: original port = %d", got)
	}
	built := PeerEndpoint{DNSOrIP: DNSOrIP{IP: "2001:db8::7"}, Port: 51820}
	if got, want := built.String(), "[2001:db8::7]:51820"; got != want {
		t.Errorf("String() = %q, want %q", got, want)
	}
}
