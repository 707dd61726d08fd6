package k8s

import (
	"encoding/json"
	"errors"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/kilofed/kilofed/mesh/apis/kilo/v1alpha1"
	"github.com/kilofed/kilofed/mesh/topology"
	"github.com/kilofed/kilofed/mesh/topology/wgconf"
)

const psk = "khElfHPKHmdR5ussJMZY7rt+K6pvn3kUOtUKhaL+zbk="

// peerFromJSON decodes a Peer as the informer does.
func peerFromJSON(t *testing.T, s string) *v1alpha1.Peer {
	t.Helper()
	var p v1alpha1.Peer
	if err := json.Unmarshal([]byte(s), &p); err != nil {
		t.Fatalf("decode %s: %v", s, err)
	}
	return &p
}

func TestPeerFromObject(t *testing.T) {
	created := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	pskKey := wgconf.SecretKey(mustKey(psk))
	for _, tc := range []struct {
		name string
		spec string // JSON of the spec
		want topology.Peer
		errs []error // sentinels; nil if valid
		text string  // substring of the error
	}{
		{
			name: "French seed admin-workstation (with a real key)",
			spec: `{"allowedIPs":["10.5.100.2/32"],"publicKey":"` + keyA + `","persistentKeepalive":10}`,
			want: topology.Peer{AllowedIPs: []netip.Prefix{pfx("10.5.100.2/32")}, PublicKey: mustKey(keyA), PersistentKeepalive: 10 * time.Second},
		},
		{
			name: "French seed DR peer: string endpoint read as DNS and port",
			spec: `{"allowedIPs":["10.11.0.0/16","10.21.0.0/16"],"publicKey":"` + keyB + `","endpoint":"dr-gateway.example.com:51820","persistentKeepalive":25}`,
			want: topology.Peer{AllowedIPs: []netip.Prefix{pfx("10.11.0.0/16"), pfx("10.21.0.0/16")}, PublicKey: mustKey(keyB),
				Endpoint: &topology.Endpoint{DNS: "dr-gateway.example.com", Port: 51820}, PersistentKeepalive: 25 * time.Second},
		},
		{
			name: "Kilo object endpoint with an IP, preshared key, masked allowed IPs",
			spec: `{"allowedIPs":["10.12.0.1/16","fd12:ab::1/64"],"publicKey":"` + keyA + `","presharedKey":"` + psk + `","endpoint":{"dnsOrIP":{"ip":"203.0.113.7"},"port":51821}}`,
			want: topology.Peer{AllowedIPs: []netip.Prefix{pfx("10.12.0.0/16"), pfx("fd12:ab::/64")}, PublicKey: mustKey(keyA), PresharedKey: &pskKey,
				Endpoint: ep("203.0.113.7", 51821)},
		},
		{
			name: "object endpoint with DNS and IP: DNS wins",
			spec: `{"allowedIPs":["10.5.100.3/32"],"publicKey":"` + keyA + `","endpoint":{"dnsOrIP":{"dns":"gw.example.com","ip":"203.0.113.7"},"port":51820}}`,
			want: topology.Peer{AllowedIPs: []netip.Prefix{pfx("10.5.100.3/32")}, PublicKey: mustKey(keyA), Endpoint: &topology.Endpoint{DNS: "gw.example.com", Port: 51820}},
		},
		{
			name: "IPv6 string endpoint",
			spec: `{"allowedIPs":["10.5.100.3/32"],"publicKey":"` + keyA + `","endpoint":"[2001:db8::7]:51820"}`,
			want: topology.Peer{AllowedIPs: []netip.Prefix{pfx("10.5.100.3/32")}, PublicKey: mustKey(keyA), Endpoint: ep("2001:db8::7", 51820)},
		},
		{
			name: "French seed DR placeholder key",
			spec: `{"allowedIPs":["10.11.0.0/16"],"publicKey":"DrClusterPublicKeyBase64=="}`,
			errs: []error{ErrInvalidPeer, v1alpha1.ErrInvalidKey},
			text: "peer \"p\": invalid peer: invalid WireGuard key: publicKey \"DrClusterPublicKeyBase64==\" must be 44 base64 characters as printed by `wg pubkey`",
		},
		{
			name: "bad endpoint",
			spec: `{"allowedIPs":["10.5.100.3/32"],"publicKey":"` + keyA + `","endpoint":"dr-gateway.example.com"}`,
			errs: []error{ErrInvalidPeer, v1alpha1.ErrInvalidEndpoint},
			text: `endpoint: invalid endpoint "dr-gateway.example.com": not host:port`,
		},
		{
			name: "bad CIDR and keepalive",
			spec: `{"allowedIPs":["10.300.0.0/16"],"publicKey":"` + keyA + `","persistentKeepalive":-1}`,
			errs: []error{ErrInvalidPeer, v1alpha1.ErrInvalidAllowedIPs, v1alpha1.ErrInvalidKeepalive},
			text: `"10.300.0.0/16" is not a CIDR`,
		},
		{
			name: "key of 32 bytes with a newline inside (base64 would skip it)",
			spec: `{"allowedIPs":["10.5.100.3/32"],"publicKey":"` + keyA[:20] + `\n` + keyA[20:] + `"}`,
			errs: []error{ErrInvalidPeer, v1alpha1.ErrInvalidKey},
			text: `must be 44 base64 characters`,
		},
		{
			name: "bad preshared key",
			spec: `{"allowedIPs":["10.5.100.3/32"],"publicKey":"` + keyA + `","presharedKey":"secret"}`,
			errs: []error{ErrInvalidPeer, v1alpha1.ErrInvalidKey},
			text: `presharedKey`,
		},
		{
			name: "no allowed IPs",
			spec: `{"allowedIPs":[],"publicKey":"` + keyA + `"}`,
			errs: []error{ErrInvalidPeer, v1alpha1.ErrInvalidAllowedIPs},
			text: `the list is empty`,
		},
		{
			name: "keepalive above 65535",
			spec: `{"allowedIPs":["10.5.100.3/32"],"publicKey":"` + keyA + `","persistentKeepalive":65536}`,
			errs: []error{ErrInvalidPeer, v1alpha1.ErrInvalidKeepalive},
			text: `65536`,
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := peerFromJSON(t, `{"metadata":{"name":"p"},"spec":`+tc.spec+`}`)
			p.CreationTimestamp = metav1.NewTime(created)
			got, err := PeerFromObject(p)
			if tc.errs == nil {
				if err != nil {
					t.Fatalf("PeerFromObject: %v", err)
				}
				tc.want.Name, tc.want.Created = "p", created
				if diff := cmp.Diff(tc.want, got, netipCmp); diff != "" {
					t.Errorf("peer (-want +got):\n%s", diff)
				}
				return
			}
			if err == nil {
				t.Fatalf("PeerFromObject = %+v, want an error", got)
			}
			for _, s := range tc.errs {
				if !errors.Is(err, s) {
					t.Errorf("error %q does not wrap %v", err, s)
				}
			}
			var pr Problem
			if !errors.As(err, &pr) || pr.Kind != topology.KindPeer || pr.Name != "p" {
				t.Errorf("error %#v is not a Problem of peer p", err)
			}
			if !strings.Contains(err.Error(), tc.text) {
				t.Errorf("error %q does not contain %q", err, tc.text)
			}
		})
	}
}

func TestPeerViaGatewayAnnotation(t *testing.T) {
	for v, want := range map[string]bool{"": false, "false": false, "true": true} {
		p := peerFromJSON(t, `{"metadata":{"name":"p","annotations":{"`+PeerViaGatewayAnnotation+`":"`+v+`"}},"spec":{"allowedIPs":["10.11.0.0/16"],"publicKey":"`+keyA+`","endpoint":"198.51.100.7:51820"}}`)
		got, err := PeerFromObject(p)
		if err != nil || got.ViaGateway != want {
			t.Errorf("annotation %q: ViaGateway %v, err %v; want %v", v, got.ViaGateway, err, want)
		}
	}
	p := peerFromJSON(t, `{"metadata":{"name":"p","annotations":{"`+PeerViaGatewayAnnotation+`":"yes"}},"spec":{"allowedIPs":["10.11.0.0/16"],"publicKey":"`+keyA+`"}}`)
	if _, err := PeerFromObject(p); !errors.Is(err, ErrInvalidPeer) || !strings.Contains(err.Error(), PeerViaGatewayAnnotation) {
		t.Errorf("annotation \"yes\": err %v, want an invalid peer naming the annotation", err)
	}
}
