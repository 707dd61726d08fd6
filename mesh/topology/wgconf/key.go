package wgconf

import (
	"bytes"
	"crypto/ecdh"
	"crypto/rand"
	"encoding/base64"
	"errors"
	"fmt"
	"log/slog"
)

// KeyLen is the length of a WireGuard key in bytes.
const KeyLen = 32

// ErrInvalidKey is returned for a string that is not a base64 WireGuard key.
var ErrInvalidKey = errors.New("not a WireGuard key: want 32 bytes in base64 (44 characters, as wg genkey and wg pubkey print)")

// Key is a WireGuard public key; the zero Key means unknown.
type Key [KeyLen]byte

// ParseKey parses a public key in WireGuard's base64 form.
func ParseKey(s string) (Key, error) {
	b, err := decode(s)
	return Key(b), err
}

// String returns the key in WireGuard's base64 form.
func (k Key) String() string { return base64.StdEncoding.EncodeToString(k[:]) }

// IsZero reports whether k is the zero (unknown) key.
func (k Key) IsZero() bool { return k == Key{} }

// MarshalText returns the key in base64, for JSON and YAML.
func (k Key) MarshalText() ([]byte, error) { return []byte(k.String()), nil }

// Compare orders keys by their bytes, as the peers of a Config are sorted.
func (k Key) Compare(o Key) int { return bytes.Compare(k[:], o[:]) }

// SecretKey is a key that must not be printed: an interface's private key
// or a peer's preshared key. It formats as "(redacted)" with every fmt verb
// and logs as "(redacted)" with slog; Base64 returns the real value.
type SecretKey [KeyLen]byte

// redacted is what a SecretKey prints as.
const redacted = "(redacted)"

// ParseSecretKey parses a private or preshared key in WireGuard's base64
// form. The error never contains the key.
func ParseSecretKey(s string) (SecretKey, error) {
	b, err := decode(s)
	return SecretKey(b), err
}

// GeneratePrivateKey returns a new random private key, clamped as
// Curve25519 requires (what wg genkey prints).
func GeneratePrivateKey() (SecretKey, error) {
	var k SecretKey
	if _, err := rand.Read(k[:]); err != nil {
		return SecretKey{}, fmt.Errorf("generate private key: %w", err)
	}
	k[0] &= 248
	k[31] = (k[31] & 127) | 64
	return k, nil
}

// PublicKey returns the public key of private key k (what wg pubkey prints).
func (k SecretKey) PublicKey() Key {
	priv, err := ecdh.X25519().NewPrivateKey(k[:])
	if err != nil { // only for a wrong length, which the array type rules out
		panic(err)
	}
	return Key(priv.PublicKey().Bytes())
}

// Base64 returns the key in WireGuard's base64 form, for the key file and
// the wg-quick file; nothing else should write it.
func (k SecretKey) Base64() string { return base64.StdEncoding.EncodeToString(k[:]) }

// IsZero reports whether k is the zero (unset) key.
func (k SecretKey) IsZero() bool { return k == SecretKey{} }

// String returns "(redacted)".
func (k SecretKey) String() string { return redacted }

// GoString returns "(redacted)", for %#v.
func (k SecretKey) GoString() string { return redacted }

// Format writes "(redacted)" whatever the verb, so that %x or %d do not
// print the key's bytes either.
func (k SecretKey) Format(f fmt.State, verb rune) { fmt.Fprint(f, redacted) }

// LogValue returns "(redacted)" for slog.
func (k SecretKey) LogValue() slog.Value { return slog.StringValue(redacted) }

// MarshalText returns "(redacted)", so that encoding/json and YAML never
// write the key either.
func (k SecretKey) MarshalText() ([]byte, error) { return []byte(redacted), nil }

func decode(s string) ([KeyLen]byte, error) {
	var k [KeyLen]byte
	b, err := base64.StdEncoding.DecodeString(s)
	if err != nil || len(b) != KeyLen {
		return k, ErrInvalidKey
	}
	copy(k[:], b)
	return k, nil
}
