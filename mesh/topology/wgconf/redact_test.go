package wgconf

import (
	"bytes"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/netip"
	"strings"
	"testing"
)

// TestSecretsNeverPrint shows that neither fmt, slog nor encoding/json
// writes a private or preshared key held in a Config, an Interface or a
// Peer, in any form (base64, hex, bytes).
func TestSecretsNeverPrint(t *testing.T) {
	priv, psk := SecretKey(key(0xa7)), SecretKey(key(0x5c))
	peer := Peer{Name: "laptop", PublicKey: key(1), PresharedKey: &psk, AllowedIPs: []netip.Prefix{netip.MustParsePrefix("10.5.0.1/32")}}
	cfg := Config{PrivateKey: priv, ListenPort: 51820, Peers: []Peer{peer}}
	iface := Interface{Config: cfg, Address: []netip.Prefix{netip.MustParsePrefix("10.4.0.1/16")}}
	secrets := map[string]SecretKey{"private": priv, "preshared": psk}

	var outputs []string
	for _, v := range []any{cfg, &cfg, iface, peer, priv, &psk} {
		for _, verb := range []string{"%v", "%+v", "%#v", "%s", "%x", "%X", "%d", "%q"} {
			outputs = append(outputs, fmt.Sprintf(verb, v))
		}
		outputs = append(outputs, fmt.Sprint(v), fmt.Sprintln(v))
		for _, h := range []func(*bytes.Buffer) slog.Handler{
			func(b *bytes.Buffer) slog.Handler { return slog.NewTextHandler(b, nil) },
			func(b *bytes.Buffer) slog.Handler { return slog.NewJSONHandler(b, nil) },
		} {
			var b bytes.Buffer
			slog.New(h(&b)).Info("config", "value", v)
			outputs = append(outputs, b.String())
		}
		j, err := json.Marshal(v)
		if err != nil {
			t.Fatalf("json.Marshal(%T): %v", v, err)
		}
		outputs = append(outputs, string(j))
	}
	for _, out := range outputs {
		for name, k := range secrets {
			for _, form := range []string{k.Base64(), hex.EncodeToString(k[:]), strings.ToUpper(hex.EncodeToString(k[:])), fmt.Sprint([32]byte(k))} {
				if strings.Contains(out, form) {
					t.Errorf("the %s key appears in %q", name, out)
				}
			}
		}
	}
	if !strings.Contains(fmt.Sprint(cfg), "laptop") || !strings.Contains(fmt.Sprint(iface), "10.4.0.1/16") {
		t.Errorf("the redacted forms lost what they should show: %v / %v", cfg, iface)
	}
}
