package v1alpha1

import (
	"encoding/base64"
	"errors"
	"fmt"
	"net/netip"
	"regexp"
)

// Sentinel errors of Peer.Validate, matched with errors.Is.
var (
	// ErrInvalidKey is wrapped by errors about a public or preshared key.
	ErrInvalidKey = errors.New("invalid WireGuard key")
	// ErrInvalidAllowedIPs is wrapped by errors about allowedIPs.
	ErrInvalidAllowedIPs = errors.New("invalid allowedIPs")
	// ErrInvalidKeepalive is wrapped by errors about persistentKeepalive.
	ErrInvalidKeepalive = errors.New("invalid persistentKeepalive")
)

// keyPattern is the CRD schema's rule for keys: the base64 form of 32 bytes.
var keyPattern = regexp.MustCompile(`^[A-Za-z0-9+/]{43}=$`)

// ValidateKey reports whether s is a WireGuard key as `wg pubkey` and
// `wg genpsk` print them: 44 base64 characters that decode to 32 bytes.
// field names the key in the error ("publicKey", "presharedKey").
func ValidateKey(field, s string) error {
	if keyPattern.MatchString(s) {
		if b, err := base64.StdEncoding.DecodeString(s); err == nil && len(b) == 32 {
			return nil
		}
	}
	tool := "wg pubkey"
	if field == "presharedKey" {
		tool = "wg genpsk"
	}
	return fmt.Errorf("%w: %s %q must be 44 base64 characters as printed by `%s`", ErrInvalidKey, field, s, tool)
}

// Validate checks the spec as the CRD schema does, plus the endpoint, which
// the schema cannot check; it returns every problem found, joined.
func (p *Peer) Validate() error {
	var errs []error
	if err := ValidateKey("publicKey", p.Spec.PublicKey); err != nil {
		errs = append(errs, err)
	}
	if p.Spec.PresharedKey != "" {
		if err := ValidateKey("presharedKey", p.Spec.PresharedKey); err != nil {
			errs = append(errs, err)
		}
	}
	if len(p.Spec.AllowedIPs) == 0 {
		errs = append(errs, fmt.Errorf("%w: the list is empty; give at least one CIDR routed to the peer, such as 10.5.100.2/32", ErrInvalidAllowedIPs))
	}
	for _, s := range p.Spec.AllowedIPs {
		if _, err := netip.ParsePrefix(s); err != nil {
			errs = append(errs, fmt.Errorf("%w: %q is not a CIDR; write an address with its prefix length, such as 10.5.100.2/32 or 2001:db8::/64", ErrInvalidAllowedIPs, s))
		}
	}
	if k := p.Spec.PersistentKeepalive; k < 0 || k > 65535 {
		errs = append(errs, fmt.Errorf("%w: %d is not a number of seconds from 0 to 65535", ErrInvalidKeepalive, k))
	}
	if p.Spec.Endpoint != nil {
		if err := p.Spec.Endpoint.Validate(); err != nil {
			errs = append(errs, fmt.Errorf("endpoint: %w", err))
		}
	}
	return errors.Join(errs...)
}
