package kgctl

import (
	"encoding/json"
	"fmt"
	"io"
	"net/netip"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/yaml"

	"github.com/kilofed/kilofed/mesh/apis/kilo/v1alpha1"
	"github.com/kilofed/kilofed/mesh/topology"
	"github.com/kilofed/kilofed/mesh/topology/wgconf"
)

// Output formats of showconf.
const (
	// FormatWireGuard is wg-quick's INI format.
	FormatWireGuard = "wireguard"
	// FormatYAML is a kilo.squat.ai/v1alpha1 Peer object in YAML.
	FormatYAML = "yaml"
	// FormatJSON is a kilo.squat.ai/v1alpha1 Peer object in JSON.
	FormatJSON = "json"
)

// peerManifest is a Peer object as `kubectl apply` takes it: no status,
// no server-set metadata.
type peerManifest struct {
	metav1.TypeMeta `json:",inline"`
	Metadata        struct {
		Name string `json:"name"`
	} `json:"metadata"`
	Spec v1alpha1.PeerSpec `json:"spec"`
}

// PeerObject returns the Peer object named name that makes another
// WireGuard host (another cluster's mesh, a laptop) a peer like pc: its
// key, allowed IPs, endpoint, keepalive and preshared key.
func PeerObject(name string, pc wgconf.Peer) *v1alpha1.Peer {
	p := &v1alpha1.Peer{
		TypeMeta: metav1.TypeMeta{APIVersion: v1alpha1.SchemeGroupVersion.String(), Kind: v1alpha1.PeerKind},
		Spec: v1alpha1.PeerSpec{
			AllowedIPs:          prefixStrings(pc.AllowedIPs),
			PublicKey:           pc.PublicKey.String(),
			PersistentKeepalive: int(pc.PersistentKeepalive / time.Second),
		},
	}
	p.Name = name
	if pc.PresharedKey != nil {
		p.Spec.PresharedKey = pc.PresharedKey.Base64()
	}
	switch {
	case pc.EndpointDNS != "" && pc.Endpoint.Port() != 0:
		p.Spec.Endpoint = &v1alpha1.PeerEndpoint{DNSOrIP: v1alpha1.DNSOrIP{DNS: pc.EndpointDNS}, Port: uint32(pc.Endpoint.Port())}
	case pc.Endpoint.IsValid() && pc.Endpoint.Port() != 0:
		p.Spec.Endpoint = &v1alpha1.PeerEndpoint{DNSOrIP: v1alpha1.DNSOrIP{IP: pc.Endpoint.Addr().String()}, Port: uint32(pc.Endpoint.Port())}
	}
	return p
}

// peerConfigOf returns the accepted Peer p as a [Peer] section.
func peerConfigOf(p topology.Peer) wgconf.Peer {
	pc := wgconf.Peer{
		Name:                p.Name,
		PublicKey:           p.PublicKey,
		PresharedKey:        p.PresharedKey,
		AllowedIPs:          p.AllowedIPs,
		PersistentKeepalive: p.PersistentKeepalive,
	}
	if e := p.Endpoint; e != nil {
		pc.EndpointDNS = e.DNS
		pc.Endpoint = netip.AddrPortFrom(e.Addr.Addr(), e.Port)
	}
	return pc
}

// writePeerObject writes p in format (FormatYAML or FormatJSON).
func writePeerObject(w io.Writer, p *v1alpha1.Peer, format string) error {
	m := peerManifest{TypeMeta: p.TypeMeta, Spec: p.Spec}
	m.Metadata.Name = p.Name
	var (
		b   []byte
		err error
	)
	switch format {
	case FormatYAML:
		b, err = yaml.Marshal(m)
	case FormatJSON:
		b, err = json.MarshalIndent(m, "", "  ")
		b = append(b, '\n')
	default:
		return fmt.Errorf("%w %q: use wireguard, yaml or json", ErrInvalidFormat, format)
	}
	if err != nil {
		return fmt.Errorf("encode peer %s: %w", p.Name, err)
	}
	_, err = w.Write(b)
	return err
}

func prefixStrings(ps []netip.Prefix) []string {
	out := make([]string, len(ps))
	for i, p := range ps {
		out[i] = p.String()
	}
	return out
}
