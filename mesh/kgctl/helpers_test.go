package kgctl

import (
	"bytes"
	"context"
	"crypto/sha256"
	"net/netip"
	"testing"
	"time"

	"github.com/kilofed/kilofed/mesh/topology"
	"github.com/kilofed/kilofed/mesh/topology/wgconf"
)

// privateKey returns a fixed private key derived from name.
func privateKey(name string) wgconf.SecretKey {
	k := wgconf.SecretKey(sha256.Sum256([]byte("private:" + name)))
	k[0] &= 248
	k[31] = (k[31] & 127) | 64
	return k
}

// publicKey returns the public half of privateKey(name).
func publicKey(name string) wgconf.Key { return privateKey(name).PublicKey() }

func pfx(s string) netip.Prefix { return netip.MustParsePrefix(s) }

// seedNode is a ready node as the backend reads it once its agent runs.
func seedNode(name, location, internal, external, pods, wgIP string) topology.Node {
	return topology.Node{
		Name: name, Location: location, Key: publicKey(name),
		InternalIP: pfx(internal), ExternalIP: netip.MustParseAddr(external),
		PodCIDRs: []netip.Prefix{pfx(pods)}, WireGuardIP: pfx(wgIP), Ready: true,
	}
}

// seedPeers are the French seed's Peers (seb-laptop, admin-workstation,
// cluster-dr-ovhcloud), with valid keys.
func seedPeers() []topology.Peer {
	day := func(d int) time.Time { return time.Date(2026, 1, d, 0, 0, 0, 0, time.UTC) }
	return []topology.Peer{
		{Name: "cluster-dr-ovhcloud", AllowedIPs: []netip.Prefix{pfx("10.11.0.0/16"), pfx("10.21.0.0/16")},
			PublicKey: publicKey("cluster-dr-ovhcloud"), PersistentKeepalive: 25 * time.Second, Created: day(1),
			Endpoint: &topology.Endpoint{DNS: "dr-gateway.example.com", Port: 51820}},
		{Name: "admin-workstation", AllowedIPs: []netip.Prefix{pfx("10.5.100.2/32")},
			PublicKey: publicKey("admin-workstation"), PersistentKeepalive: 10 * time.Second, Created: day(2)},
		{Name: "seb-laptop", AllowedIPs: []netip.Prefix{pfx("10.5.100.10/32")},
			PublicKey: publicKey("seb-laptop"), PersistentKeepalive: 25 * time.Second, Created: day(3)},
	}
}

// seedSnapshot is the Chinese seed's cluster (node-beijing, node-shanghai,
// subnet 10.5.0.0/16, location granularity) with the French seed's Peers,
// as the agents publish it.
func seedSnapshot() Snapshot {
	return Snapshot{
		Nodes: []topology.Node{
			seedNode("node-beijing", "cn-beijing", "10.0.1.10/24", "203.0.113.10", "10.42.0.0/24", "10.5.0.1/16"),
			seedNode("node-shanghai", "cn-shanghai", "10.0.2.20/24", "198.51.100.20", "10.42.1.0/24", "10.5.0.2/16"),
		},
		Peers:         seedPeers(),
		Granularities: map[string]topology.Granularity{"node-beijing": "location", "node-shanghai": "location"},
	}
}

// run runs the CLI (program kgctl) on src and returns stdout, stderr and
// the exit status.
func run(t *testing.T, src Source, args ...string) (string, string, int) {
	t.Helper()
	var stdout, stderr bytes.Buffer
	env := &Env{Program: "kgctl", Stdout: &stdout, Stderr: &stderr,
		OpenSource: func(context.Context, *Env, BackendFlags) (Source, error) { return src, nil }}
	code := Main(t.Context(), env, MeshCommands(), args)
	return stdout.String(), stderr.String(), code
}
