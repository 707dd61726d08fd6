package kgctl

import (
	"errors"
	"fmt"
	"io"
	"net/netip"
	"strings"
	"time"

	"github.com/kilofed/kilofed/mesh/topology"
	"github.com/kilofed/kilofed/mesh/topology/wgconf"
)

// DefaultNodeKeyFile is where kg keeps a node's private key (its --key-file).
const DefaultNodeKeyFile = "/var/lib/kilo/key"

// ErrKeyMismatch is returned when a private key does not belong to the Peer
// it is used for.
var ErrKeyMismatch = errors.New("private key does not match the Peer's public key")

// NodeOptions say how WriteNode shows a node.
type NodeOptions struct {
	// Format is FormatWireGuard (the default), FormatYAML or FormatJSON.
	// YAML and JSON write the node as a Peer object to apply in another
	// cluster, as AsPeer does.
	Format string
	// AsPeer writes the [Peer] section through which another WireGuard
	// interface reaches the node's segment, instead of the node's own
	// interface.
	AsPeer bool
	// AllowedIPs, when set, replace the segment's allowed IPs in the
	// [Peer] section or the Peer object (such as a remote cluster's pod
	// and service CIDRs).
	AllowedIPs []netip.Prefix
	// PeerName names the Peer object; empty means the node's name.
	PeerName string
	// PersistentKeepalive, when positive, replaces the segment's keepalive
	// in the [Peer] section or the Peer object (an always-up tunnel).
	PersistentKeepalive time.Duration
	// KeyFile is where the node keeps its private key, for the comment;
	// empty means DefaultNodeKeyFile.
	KeyFile string
}

// WriteNode writes what the agents configure on node name: its WireGuard
// interface (without the private key, which never leaves the node), or
// with AsPeer or a YAML/JSON format how others reach it.
func (m *Mesh) WriteNode(w io.Writer, name string, o NodeOptions) error {
	t := m.Topology
	if _, err := t.WireGuardConfig(name, wgconf.SecretKey{}); err != nil {
		return m.explain(topology.KindNode, name, err)
	}
	if (len(o.AllowedIPs) > 0 || o.PersistentKeepalive > 0) && !o.AsPeer && (o.Format == "" || o.Format == FormatWireGuard) {
		return errors.New("allowed IPs and keepalive change how others reach the node: show it as a peer (--as-peer, or -o yaml|json)")
	}
	seg, _ := t.Segment(name)
	what := m.describeSegment(seg)
	switch o.Format {
	case "", FormatWireGuard, FormatYAML, FormatJSON:
	default:
		return fmt.Errorf("%w %q: use wireguard, yaml or json", ErrInvalidFormat, o.Format)
	}
	pc := t.AsPeer(name)
	if len(o.AllowedIPs) > 0 {
		pc.AllowedIPs = o.AllowedIPs
	}
	if o.PersistentKeepalive > 0 {
		pc.PersistentKeepalive = o.PersistentKeepalive
	}
	switch o.Format {
	case FormatYAML, FormatJSON:
		peerName := o.PeerName
		if peerName == "" {
			peerName = name
		}
		return writePeerObject(w, PeerObject(peerName, pc), o.Format)
	}
	var b strings.Builder
	if o.AsPeer {
		fmt.Fprintf(&b, "# [Peer] section of %s: add it to the configuration\n# of another WireGuard interface to reach it.\n", what)
		b.WriteString(peerSection(wgconf.Render(wgconf.Interface{Config: wgconf.Config{Peers: []wgconf.Peer{pc}}},
			wgconf.RenderOptions{})))
		_, err := io.WriteString(w, b.String())
		return err
	}
	keyFile := o.KeyFile
	if keyFile == "" {
		keyFile = DefaultNodeKeyFile
	}
	fmt.Fprintf(&b, "# WireGuard configuration of node %s, as its agent applies it.\n# Segment: %s.\n", name, what)
	fmt.Fprintf(&b, "# The private key never leaves the node: it is in %s there (kg --key-file).\n", keyFile)
	if !t.IsLeader(name) {
		fmt.Fprintf(&b, "# %s does not lead its location: it has no WireGuard peers and reaches the other\n# locations through its leader %s (showconf node %s).\n",
			name, seg.LeaderNode().Name, seg.LeaderNode().Name)
	}
	b.WriteString(wgconf.Render(t.NodeConf(name), wgconf.RenderOptions{}))
	_, err := io.WriteString(w, b.String())
	return err
}

// PeerOptions say how WritePeer shows an external peer.
type PeerOptions struct {
	// Format is FormatWireGuard (the default), FormatYAML or FormatJSON
	// (the Peer object as the mesh reads it).
	Format string
	// PrivateKey, when set, fills in the PrivateKey line so that
	// `wg-quick up` works as is; it must match the Peer's public key.
	PrivateKey *wgconf.SecretKey
}

// WritePeer writes the configuration the external peer name uses itself
// (topology.PeerConf), in wg-quick's format, or the Peer object.
func (m *Mesh) WritePeer(w io.Writer, name string, o PeerOptions) error {
	t := m.Topology
	iface, err := t.PeerConf(name)
	if err != nil {
		return m.explain(topology.KindPeer, name, err)
	}
	var peer topology.Peer
	for _, p := range t.Peers {
		if p.Name == name {
			peer = p
		}
	}
	switch o.Format {
	case FormatYAML, FormatJSON:
		return writePeerObject(w, PeerObject(name, peerConfigOf(peer)), o.Format)
	case "", FormatWireGuard:
	default:
		return fmt.Errorf("%w %q: use wireguard, yaml or json", ErrInvalidFormat, o.Format)
	}
	if o.PrivateKey != nil {
		if err := checkKey(name, peer.PublicKey, *o.PrivateKey); err != nil {
			return err
		}
		iface.PrivateKey = *o.PrivateKey
	}
	var b strings.Builder
	fmt.Fprintf(&b, "# WireGuard configuration of Peer %s in the kilofed mesh %s, for wg-quick.\n", name, t.Options().Subnet)
	b.WriteString(wgconf.Render(iface, wgconf.RenderOptions{WithPrivateKey: o.PrivateKey != nil}))
	_, err = io.WriteString(w, b.String())
	return err
}

// checkKey returns ErrKeyMismatch unless key is the private half of pub.
func checkKey(peer string, pub wgconf.Key, key wgconf.SecretKey) error {
	if key.PublicKey() != pub {
		return fmt.Errorf("%w: the key's public half is %s but Peer %s has publicKey %s; use the private key whose `wg pubkey` you put in the Peer, or update the Peer's spec.publicKey",
			ErrKeyMismatch, key.PublicKey(), peer, pub)
	}
	return nil
}

// describeSegment names a segment for people: "location X (leader N)" or
// "node N".
func (m *Mesh) describeSegment(s *topology.Segment) string {
	leader := s.LeaderNode()
	if m.Topology.Options().Granularity == topology.LocationGranularity && leader.Location == s.Name {
		return fmt.Sprintf("location %s (leader %s)", s.Name, leader.Name)
	}
	if leader.Location != "" {
		return fmt.Sprintf("node %s (location %s)", leader.Name, leader.Location)
	}
	return "node " + leader.Name
}

// peerSection returns the [Peer] sections of a rendered configuration:
// everything after the [Interface] section's first blank line.
func peerSection(rendered string) string {
	if _, rest, ok := strings.Cut(rendered, "\n\n"); ok {
		return rest
	}
	return ""
}
