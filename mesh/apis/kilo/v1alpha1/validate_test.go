package v1alpha1

import (
	"errors"
	"strings"
	"testing"
)

const (
	realKey   = "4jtvKgjTuwyokGD20xKD+dprGSbpy61QRApiAO0kM20=" // wg genkey | wg pubkey
	realPSK   = "khElfHPKHmdR5ussJMZY7rt+K6pvn3kUOtUKhaL+zbk=" // wg genpsk
	seedKey   = "AbCdEfGhIjKlMnOpQrStUvWxYz0123456789AAAA="    // French seed, admin-workstation: 41 characters
	seedDRKey = "DrClusterPublicKeyBase64=="                   // French seed, DR cluster placeholder
)

func TestValidateKey(t *testing.T) {
	for _, tc := range []struct {
		name  string
		field string
		key   string
		want  string // substring of the error; empty if valid
	}{
		{name: "wg pubkey output", field: "publicKey", key: realKey},
		{name: "wg genpsk output", field: "presharedKey", key: realPSK},
		{name: "non-canonical last character still 32 bytes", field: "publicKey", key: realKey[:42] + "1="},
		{name: "seed admin-workstation placeholder", field: "publicKey", key: seedKey, want: "publicKey \"" + seedKey + "\" must be 44 base64 characters as printed by `wg pubkey`"},
		{name: "seed DR placeholder", field: "publicKey", key: seedDRKey, want: "must be 44 base64 characters as printed by `wg pubkey`"},
		{name: "31 bytes", field: "publicKey", key: realKey[:42] + "==", want: "must be 44 base64"},
		{name: "no padding", field: "publicKey", key: realKey[:43], want: "must be 44 base64"},
		{name: "URL alphabet", field: "publicKey", key: "4jtvKgjTuwyokGD20xKD-dprGSbpy61QRApiAO0kM20=", want: "must be 44 base64"},
		{name: "private key is a key too", field: "publicKey", key: "aDrLoqhRBHJIvEljhkEl8pfjk2sRGF1X1nI0VCuybn0="},
		{name: "empty", field: "publicKey", key: "", want: "must be 44 base64"},
		{name: "preshared key names its tool", field: "presharedKey", key: "x", want: "as printed by `wg genpsk`"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := ValidateKey(tc.field, tc.key)
			if tc.want == "" {
				if err != nil {
					t.Errorf("ValidateKey(%q) = %v, want nil", tc.key, err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tc.want) || !errors.Is(err, ErrInvalidKey) {
				t.Errorf("ValidateKey(%q) = %v, want ErrInvalidKey containing %q", tc.key, err, tc.want)
			}
		})
	}
}

func TestPeerValidate(t *testing.T) {
	valid := func() *Peer {
		return &Peer{Spec: PeerSpec{AllowedIPs: []string{"10.5.100.2/32", "fd12::/64"}, PublicKey: realKey, PersistentKeepalive: 10}}
	}
	for _, tc := range []struct {
		name   string
		change func(p *Peer)
		want   []error // sentinels the error must wrap; nil if valid
		text   string  // substring of the error
	}{
		{name: "valid", change: func(*Peer) {}},
		{name: "valid with psk and endpoint", change: func(p *Peer) {
			p.Spec.PresharedKey = realPSK
			p.Spec.Endpoint = &PeerEndpoint{DNSOrIP: DNSOrIP{DNS: "gw.example.com"}, Port: 51820}
		}},
		{name: "bad public key", change: func(p *Peer) { p.Spec.PublicKey = seedDRKey }, want: []error{ErrInvalidKey}, text: "publicKey"},
		{name: "bad preshared key", change: func(p *Peer) { p.Spec.PresharedKey = "secret" }, want: []error{ErrInvalidKey}, text: "presharedKey \"secret\""},
		{name: "no allowed IPs", change: func(p *Peer) { p.Spec.AllowedIPs = nil }, want: []error{ErrInvalidAllowedIPs}, text: "the list is empty"},
		{name: "address without prefix", change: func(p *Peer) { p.Spec.AllowedIPs = []string{"10.5.100.2"} }, want: []error{ErrInvalidAllowedIPs}, text: `"10.5.100.2" is not a CIDR`},
		{name: "keepalive too large", change: func(p *Peer) { p.Spec.PersistentKeepalive = 65536 }, want: []error{ErrInvalidKeepalive}, text: "65536"},
		{name: "negative keepalive", change: func(p *Peer) { p.Spec.PersistentKeepalive = -1 }, want: []error{ErrInvalidKeepalive}},
		{name: "bad endpoint", change: func(p *Peer) { p.Spec.Endpoint = &PeerEndpoint{DNSOrIP: DNSOrIP{DNS: "gw.example.com"}} }, want: []error{ErrInvalidEndpoint}, text: "endpoint: invalid endpoint: port 0"},
		{name: "every problem at once", change: func(p *Peer) {
			p.Spec.PublicKey, p.Spec.AllowedIPs, p.Spec.PersistentKeepalive = "", []string{"x"}, -5
		}, want: []error{ErrInvalidKey, ErrInvalidAllowedIPs, ErrInvalidKeepalive}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := valid()
			tc.change(p)
			err := p.Validate()
			if len(tc.want) == 0 {
				if err != nil {
					t.Errorf("Validate() = %v, want nil", err)
				}
				return
			}
			if err == nil {
				t.Fatalf("Validate() = nil, want %v", tc.want)
			}
			for _, w := range tc.want {
				if !errors.Is(err, w) {
					t.Errorf("Validate() = %v, want it to wrap %v", err, w)
				}
			}
			if !strings.Contains(err.Error(), tc.text) {
				t.Errorf("Validate() = %v, want it to contain %q", err, tc.text)
			}
		})
	}
}
