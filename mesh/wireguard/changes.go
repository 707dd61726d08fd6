package wireguard

import (
	"fmt"
	"slices"
	"strings"
	"time"

	"golang.zx2c4.com/wireguard/wgctrl/wgtypes"

	"github.com/kilofed/kilofed/mesh/topology/wgconf"
)

// changes returns the wgctrl configuration that turns the device cur into
// desired, touching only what differs, and whether there is anything to
// send. Peers of cur missing from desired are removed; new peers are added
// with their allowed IPs; changed peers are updated in place (UpdateOnly)
// with only their changed fields; unchanged peers are not mentioned. An
// invalid desired endpoint, a zero private key and a zero listen port leave
// the device's values alone.
func changes(desired wgconf.Config, cur *wgtypes.Device) (wgtypes.Config, bool) {
	var cfg wgtypes.Config
	if !desired.PrivateKey.IsZero() && wgtypes.Key(desired.PrivateKey) != cur.PrivateKey {
		k := wgtypes.Key(desired.PrivateKey)
		cfg.PrivateKey = &k
	}
	if desired.ListenPort != 0 && desired.ListenPort != cur.ListenPort {
		port := desired.ListenPort
		cfg.ListenPort = &port
	}
	live := make(map[wgtypes.Key]*wgtypes.Peer, len(cur.Peers))
	for i := range cur.Peers {
		live[cur.Peers[i].PublicKey] = &cur.Peers[i]
	}
	want := make(map[wgtypes.Key]bool, len(desired.Peers))
	for _, p := range desired.Peers {
		want[wgtypes.Key(p.PublicKey)] = true
		l, ok := live[wgtypes.Key(p.PublicKey)]
		if !ok {
			cfg.Peers = append(cfg.Peers, newPeer(p))
			continue
		}
		if pc, changed := updatePeer(p, l); changed {
			cfg.Peers = append(cfg.Peers, pc)
		}
	}
	for _, l := range cur.Peers {
		if !want[l.PublicKey] {
			cfg.Peers = append(cfg.Peers, wgtypes.PeerConfig{PublicKey: l.PublicKey, Remove: true})
		}
	}
	slices.SortFunc(cfg.Peers, func(a, b wgtypes.PeerConfig) int { return compareKeys(a.PublicKey, b.PublicKey) })
	return cfg, cfg.PrivateKey != nil || cfg.ListenPort != nil || len(cfg.Peers) > 0
}

func newPeer(p wgconf.Peer) wgtypes.PeerConfig {
	pc := wgtypes.PeerConfig{
		PublicKey:         wgtypes.Key(p.PublicKey),
		ReplaceAllowedIPs: true,
		AllowedIPs:        ipNetsFromPrefixes(canonicalPrefixes(p.AllowedIPs)),
	}
	if p.PresharedKey != nil {
		k := wgtypes.Key(*p.PresharedKey)
		pc.PresharedKey = &k
	}
	if p.Endpoint.IsValid() {
		pc.Endpoint = udpFromAddrPort(p.Endpoint)
	}
	if ka := keepalive(p); ka > 0 {
		pc.PersistentKeepaliveInterval = &ka
	}
	return pc
}

func updatePeer(p wgconf.Peer, l *wgtypes.Peer) (wgtypes.PeerConfig, bool) {
	pc := wgtypes.PeerConfig{PublicKey: wgtypes.Key(p.PublicKey), UpdateOnly: true}
	changed := false
	var psk wgtypes.Key
	if p.PresharedKey != nil {
		psk = wgtypes.Key(*p.PresharedKey)
	}
	if psk != l.PresharedKey {
		pc.PresharedKey = &psk
		changed = true
	}
	if p.Endpoint.IsValid() && unmapAddrPort(p.Endpoint) != addrPortFromUDP(l.Endpoint) {
		pc.Endpoint = udpFromAddrPort(p.Endpoint)
		changed = true
	}
	if ka := keepalive(p); ka != l.PersistentKeepaliveInterval {
		pc.PersistentKeepaliveInterval = &ka
		changed = true
	}
	want := canonicalPrefixes(p.AllowedIPs)
	if !slices.Equal(want, prefixesFromIPNets(l.AllowedIPs)) {
		pc.ReplaceAllowedIPs = true
		pc.AllowedIPs = ipNetsFromPrefixes(want)
		changed = true
	}
	return pc, changed
}

// keepalive rounds to whole seconds, WireGuard's resolution.
func keepalive(p wgconf.Peer) time.Duration {
	return p.PersistentKeepalive.Round(time.Second)
}

// formatChanges writes cfg as canonical text, one line per change, for logs
// and for the Fake's record. Keys are abbreviated to 8 characters.
func formatChanges(cfg wgtypes.Config) string {
	var b strings.Builder
	if cfg.PrivateKey != nil {
		fmt.Fprintf(&b, "private-key %s\n", short(cfg.PrivateKey.PublicKey()))
	}
	if cfg.ListenPort != nil {
		fmt.Fprintf(&b, "listen-port %d\n", *cfg.ListenPort)
	}
	for _, p := range cfg.Peers {
		switch {
		case p.Remove:
			fmt.Fprintf(&b, "remove peer %s\n", short(p.PublicKey))
			continue
		case p.UpdateOnly:
			fmt.Fprintf(&b, "update peer %s", short(p.PublicKey))
		default:
			fmt.Fprintf(&b, "add peer %s", short(p.PublicKey))
		}
		if p.Endpoint != nil {
			fmt.Fprintf(&b, " endpoint %s", addrPortFromUDP(p.Endpoint))
		}
		if p.PersistentKeepaliveInterval != nil {
			fmt.Fprintf(&b, " keepalive %s", *p.PersistentKeepaliveInterval)
		}
		if p.PresharedKey != nil {
			if *p.PresharedKey == (wgtypes.Key{}) {
				b.WriteString(" preshared-key none")
			} else {
				b.WriteString(" preshared-key set")
			}
		}
		if p.ReplaceAllowedIPs {
			ips := prefixesFromIPNets(p.AllowedIPs)
			s := make([]string, len(ips))
			for i, ip := range ips {
				s[i] = ip.String()
			}
			fmt.Fprintf(&b, " allowed-ips [%s]", strings.Join(s, " "))
		}
		b.WriteString("\n")
	}
	return b.String()
}

func short(k wgtypes.Key) string { return k.String()[:8] }
