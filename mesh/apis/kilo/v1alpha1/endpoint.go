package v1alpha1

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"strconv"
	"strings"

	"k8s.io/apimachinery/pkg/util/validation"
)

// ErrInvalidEndpoint is wrapped by every error about an endpoint that cannot
// be used: a malformed "host:port" string, a bad object, a bad port.
var ErrInvalidEndpoint = errors.New("invalid endpoint")

// endpointExamples ends the endpoint error messages: how a valid one looks.
const endpointExamples = `write it as "host:port" (gw.example.com:51820, 203.0.113.7:51820, [2001:db8::7]:51820) or as {dnsOrIP: {dns: gw.example.com}, port: 51820}`

// PeerEndpoint is where a peer listens: a DNS name or an IP, and a UDP port.
//
// In JSON and YAML it is either Kilo's object form
//
//	endpoint: {dnsOrIP: {dns: gw.example.com}, port: 51820}
//	endpoint: {dnsOrIP: {ip: 203.0.113.7}, port: 51820}
//
// or a "host:port" string, as the French seed writes it:
//
//	endpoint: dr-gateway.example.com:51820
//
// Both decode into DNSOrIP and Port. Decoding never fails, so that one bad
// Peer cannot break a watch of all Peers: a value that is not an endpoint is
// kept as it was written and reported by Validate. Encoding writes a value
// back in the form it was read in as long as DNSOrIP and Port were not
// changed (so a client that reads and updates a Peer does not rewrite the
// user's spec); otherwise, and for endpoints built in Go, it writes the
// object form.
type PeerEndpoint struct {
	// dnsOrIP is a DNS name or an IP address.
	DNSOrIP `json:"dnsOrIP"`
	// port is the peer's WireGuard UDP port, 1 to 65535.
	Port uint32 `json:"port"`

	// raw is the JSON this endpoint was decoded from when that was not the
	// object form (a "host:port" string), or when it was not an endpoint.
	raw string
	// invalid says why the decoded JSON is not an endpoint; empty if it is.
	invalid string
}

// DNSOrIP is a DNS name or an IP address; when both are set the name wins,
// as in Kilo.
type DNSOrIP struct {
	// dns is a DNS name (an RFC 1123 subdomain) that the agents resolve.
	// +optional
	DNS string `json:"dns,omitempty"`
	// ip is an IPv4 or IPv6 address.
	// +optional
	IP string `json:"ip,omitempty"`
}

// ParseEndpoint parses a "host:port" string, where host is a DNS name, an
// IPv4 address or a bracketed IPv6 address, into a PeerEndpoint.
func ParseEndpoint(s string) (PeerEndpoint, error) {
	host, port, err := net.SplitHostPort(s)
	if err != nil {
		return PeerEndpoint{}, fmt.Errorf("%w %q: not host:port; %s", ErrInvalidEndpoint, s, endpointExamples)
	}
	p, err := strconv.ParseUint(port, 10, 16)
	if err != nil || p == 0 {
		return PeerEndpoint{}, fmt.Errorf("%w %q: port %q is not a number from 1 to 65535", ErrInvalidEndpoint, s, port)
	}
	e := PeerEndpoint{Port: uint32(p)}
	if addr, err := netip.ParseAddr(host); err == nil {
		if addr.Zone() != "" {
			return PeerEndpoint{}, fmt.Errorf("%w %q: an IPv6 zone is not allowed in an endpoint", ErrInvalidEndpoint, s)
		}
		e.IP = addr.String()
		return e, nil
	}
	if err := checkDNS(host); err != nil {
		return PeerEndpoint{}, fmt.Errorf("%w %q: %w", ErrInvalidEndpoint, s, err)
	}
	e.DNS = host
	return e, nil
}

// checkDNS reports whether name is usable as a DNS name: an RFC 1123
// subdomain, in any case, with an optional final dot.
func checkDNS(name string) error {
	if errs := validation.IsDNS1123Subdomain(strings.ToLower(strings.TrimSuffix(name, "."))); len(errs) > 0 {
		return fmt.Errorf("host %q is neither an IP address nor a DNS name (letters, digits, '-' and '.', starting and ending with a letter or digit)", name)
	}
	return nil
}

// Validate reports why the endpoint cannot be used, or nil.
func (e *PeerEndpoint) Validate() error {
	if e.invalid != "" {
		return decodeError(e.invalid)
	}
	switch {
	case e.DNS == "" && e.IP == "":
		return fmt.Errorf("%w: neither dnsOrIP.dns nor dnsOrIP.ip is set; %s", ErrInvalidEndpoint, endpointExamples)
	case e.DNS != "":
		if err := checkDNS(e.DNS); err != nil {
			return fmt.Errorf("%w: dnsOrIP.dns: %w", ErrInvalidEndpoint, err)
		}
	default:
		if addr, err := netip.ParseAddr(e.IP); err != nil || addr.Zone() != "" {
			return fmt.Errorf("%w: dnsOrIP.ip %q is not an IP address", ErrInvalidEndpoint, e.IP)
		}
	}
	if e.Port == 0 || e.Port > 65535 {
		return fmt.Errorf("%w: port %d is not a number from 1 to 65535", ErrInvalidEndpoint, e.Port)
	}
	return nil
}

// Host returns the DNS name if set, else the IP address.
func (e *PeerEndpoint) Host() string {
	if e.DNS != "" {
		return e.DNS
	}
	return e.IP
}

// String returns the endpoint as "host:port", or as it was written if it is
// not a valid endpoint.
func (e *PeerEndpoint) String() string {
	if e.invalid != "" {
		return e.raw
	}
	return net.JoinHostPort(e.Host(), strconv.FormatUint(uint64(e.Port), 10))
}

// decodeError is the error of a value that did not decode into an endpoint.
type decodeError string

func (e decodeError) Error() string { return string(e) }

// Unwrap returns ErrInvalidEndpoint.
func (e decodeError) Unwrap() error { return ErrInvalidEndpoint }

// endpointObject is the object form, decoded without PeerEndpoint's methods.
type endpointObject struct {
	DNSOrIP *DNSOrIP `json:"dnsOrIP,omitempty"`
	Port    *int64   `json:"port,omitempty"`
}

// UnmarshalJSON decodes the object or the string form; it never fails, a
// value that is not an endpoint is recorded for Validate.
func (e *PeerEndpoint) UnmarshalJSON(data []byte) error {
	data = bytes.TrimSpace(data)
	*e = PeerEndpoint{}
	switch {
	case len(data) > 0 && data[0] == '"':
		e.raw = string(data)
		var s string
		if err := json.Unmarshal(data, &s); err != nil {
			e.invalid = fmt.Sprintf("%v: %s is not a JSON string: %v", ErrInvalidEndpoint, data, err)
			return nil
		}
		parsed, err := ParseEndpoint(s)
		if err != nil {
			e.invalid = err.Error()
			return nil
		}
		e.DNSOrIP, e.Port = parsed.DNSOrIP, parsed.Port
	case len(data) > 0 && data[0] == '{':
		var o endpointObject
		if err := json.Unmarshal(data, &o); err != nil {
			e.raw, e.invalid = string(data), fmt.Sprintf("%v %s: %v; %s", ErrInvalidEndpoint, data, err, endpointExamples)
			return nil
		}
		if o.Port != nil && (*o.Port < 0 || *o.Port > 65535) {
			e.raw, e.invalid = string(data), fmt.Sprintf("%v: port %d is not a number from 1 to 65535", ErrInvalidEndpoint, *o.Port)
			return nil
		}
		if o.DNSOrIP != nil {
			e.DNSOrIP = *o.DNSOrIP
		}
		if o.Port != nil {
			e.Port = uint32(*o.Port)
		}
	default:
		e.raw, e.invalid = string(data), fmt.Sprintf("%v %s: %s", ErrInvalidEndpoint, data, endpointExamples)
	}
	return nil
}

// MarshalJSON encodes the endpoint in the form it was read in if unchanged,
// else in the object form.
func (e PeerEndpoint) MarshalJSON() ([]byte, error) {
	if e.raw != "" {
		if e.invalid != "" && e.DNSOrIP == (DNSOrIP{}) && e.Port == 0 {
			return []byte(e.raw), nil
		}
		var s string
		if err := json.Unmarshal([]byte(e.raw), &s); err == nil {
			if parsed, err := ParseEndpoint(s); err == nil && parsed.DNSOrIP == e.DNSOrIP && parsed.Port == e.Port {
				return []byte(e.raw), nil
			}
		}
	}
	return json.Marshal(endpointObject{DNSOrIP: &e.DNSOrIP, Port: ptrTo(int64(e.Port))})
}

func ptrTo[T any](v T) *T { return &v }
