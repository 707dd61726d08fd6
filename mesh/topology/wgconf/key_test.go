package wgconf

import (
	"encoding/hex"
	"errors"
	"testing"
)

func TestPublicKeyIsX25519OfTheBasePoint(t *testing.T) {
	// RFC 7748, section 6.1: Alice's keys.
	priv, _ := hex.DecodeString("77076d0a7318a57d3c16c17251b26645df4c2f87ebc0992ab177fba51db92c2a")
	want, _ := hex.DecodeString("8520f0098930a754748b7ddcb43ef75a0dbf3a0d26381af4eba4a98eaa9b4e6a")
	if got := SecretKey(priv).PublicKey(); got != Key(want) {
		t.Errorf("PublicKey = %x, want %x", got[:], want)
	}
}

func TestParseKeyRoundTrips(t *testing.T) {
	k, err := GeneratePrivateKey()
	if err != nil {
		t.Fatal(err)
	}
	back, err := ParseSecretKey(k.Base64())
	if err != nil || back != k {
		t.Errorf("ParseSecretKey(Base64()) = %v, %v; want the same key", back == k, err)
	}
	pub := k.PublicKey()
	if got, err := ParseKey(pub.String()); err != nil || got != pub {
		t.Errorf("ParseKey(String()) = %s, %v; want %s", got, err, pub)
	}
	if k[0]&7 != 0 || k[31]&128 != 0 || k[31]&64 == 0 {
		t.Errorf("GeneratePrivateKey is not clamped: %x...%x", k[0], k[31])
	}
}

func TestParseKeyRejects(t *testing.T) {
	for _, tt := range []struct{ name, in string }{
		{name: "empty", in: ""},
		{name: "not base64", in: "not a key at all, not a key at all, not a k="},
		{name: "31 bytes", in: "AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA=="},
		{name: "33 bytes", in: "AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			if _, err := ParseKey(tt.in); !errors.Is(err, ErrInvalidKey) {
				t.Errorf("ParseKey(%q) error = %v, want ErrInvalidKey", tt.in, err)
			}
			if _, err := ParseSecretKey(tt.in); !errors.Is(err, ErrInvalidKey) {
				t.Errorf("ParseSecretKey(%q) error = %v, want ErrInvalidKey", tt.in, err)
			}
		})
	}
}
