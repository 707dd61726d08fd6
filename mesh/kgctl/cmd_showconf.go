package kgctl

import (
	"context"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/kilofed/kilofed/mesh/topology/wgconf"
)

func showconfCommand() Command {
	c := Command{
		Name:    "showconf",
		Usage:   "showconf node|peer NAME [-o wireguard|yaml|json] [flags]",
		Summary: "show the WireGuard configuration of a node or of a Peer",
	}
	c.Run = func(ctx context.Context, env *Env, args []string) error {
		var (
			m          meshFlagSet
			format     string
			asPeer     bool
			allowedIPs []string
			peerName   string
			keyFile    string
			keepalive  time.Duration
		)
		fs := newFlagSet(env, c, `
showconf node NAME prints the WireGuard configuration the agent of node NAME
applies (its private key stays on the node). With --as-peer it prints the
[Peer] section another WireGuard host adds to reach the node's location; with
-o yaml or -o json it prints that peer as a kilo.squat.ai/v1alpha1 Peer to
apply in another cluster (--allowed-ips replaces its ranges, for example the
other cluster's pod and service CIDRs).

showconf peer NAME prints the configuration of the external Peer NAME itself,
for wg-quick:
  wg genkey | tee dev-private.key | wg pubkey > dev-public.key
  `+env.Program+` showconf peer seb-laptop --private-key-file dev-private.key > /etc/wireguard/wg-cluster.conf
  wg-quick up wg-cluster
Without --private-key-file the PrivateKey line is left for you to fill in.
With -o yaml or -o json it prints the Peer object as the mesh reads it.`)
		fs.StringVarP(&format, "output", "o", FormatWireGuard, "wireguard, yaml or json")
		fs.BoolVar(&asPeer, "as-peer", false, "node: print the [Peer] section that reaches the node, for another WireGuard interface")
		fs.StringSliceVar(&allowedIPs, "allowed-ips", nil, "node with --as-peer or -o yaml|json: the peer's allowed IPs instead of the location's, comma-separated CIDRs")
		fs.StringVar(&peerName, "peer-name", "", "node with -o yaml|json: name of the Peer object (default the node's name)")
		fs.DurationVar(&keepalive, "persistent-keepalive", 0, "node with --as-peer or -o yaml|json: the peer's keepalive instead of the node's, such as 25s for an always-up tunnel")
		fs.StringVar(&keyFile, "private-key-file", "", "peer: file holding the Peer's private key (wg genkey), written into the PrivateKey line")
		m.register(fs)
		if err := parseFlags(fs, args); err != nil {
			return err
		}
		if fs.NArg() != 2 || (fs.Arg(0) != "node" && fs.Arg(0) != "peer") {
			return fmt.Errorf("%w: want node NAME or peer NAME, got %q", ErrUsage, fs.Args())
		}
		kind, name := fs.Arg(0), fs.Arg(1)
		switch format {
		case FormatWireGuard, FormatYAML, FormatJSON:
		default:
			return fmt.Errorf("%w: -o %q: use wireguard, yaml or json", ErrUsage, format)
		}
		allowed, err := parseCIDRs("--allowed-ips", allowedIPs)
		if err != nil {
			return err
		}
		switch {
		case kind == "peer" && (asPeer || len(allowed) > 0 || peerName != "" || keepalive != 0):
			return fmt.Errorf("%w: --as-peer, --allowed-ips, --peer-name and --persistent-keepalive apply to showconf node", ErrUsage)
		case keepalive < 0 || keepalive%time.Second != 0 || keepalive > 65535*time.Second:
			return fmt.Errorf("%w: --persistent-keepalive %v: use whole seconds up to 65535s, such as 25s", ErrUsage, keepalive)
		case kind == "node" && keyFile != "":
			return fmt.Errorf("%w: --private-key-file applies to showconf peer: a node's private key never leaves it", ErrUsage)
		case kind == "node" && (len(allowed) > 0 || keepalive > 0) && !asPeer && format == FormatWireGuard:
			return fmt.Errorf("%w: --allowed-ips and --persistent-keepalive change how others reach the node: add --as-peer, or use -o yaml|json", ErrUsage)
		}
		var key *wgconf.SecretKey
		if keyFile != "" {
			k, err := ReadKeyFile(keyFile)
			if err != nil {
				return err
			}
			key = &k
		}
		mesh, err := computeMesh(ctx, env, &m)
		if err != nil {
			return err
		}
		if kind == "node" {
			return mesh.WriteNode(env.Stdout, name, NodeOptions{
				Format: format, AsPeer: asPeer, AllowedIPs: allowed, PeerName: peerName, PersistentKeepalive: keepalive,
			})
		}
		if err := mesh.WritePeer(env.Stdout, name, PeerOptions{Format: format, PrivateKey: key}); err != nil {
			return err
		}
		if key == nil && format == FormatWireGuard {
			fmt.Fprintf(env.Stderr, "%s: the PrivateKey line is a placeholder: pass --private-key-file FILE (the key whose wg pubkey is Peer %s's publicKey) so that wg-quick up works as is\n",
				env.Program, name)
		}
		return nil
	}
	return c
}

// ReadKeyFile reads a WireGuard private key written by `wg genkey`.
func ReadKeyFile(path string) (wgconf.SecretKey, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return wgconf.SecretKey{}, fmt.Errorf("read private key: %w", err)
	}
	k, err := wgconf.ParseSecretKey(strings.TrimSpace(string(b)))
	if err != nil {
		return wgconf.SecretKey{}, fmt.Errorf("%s is not a WireGuard private key (%w): create one with wg genkey > %s", path, err, path)
	}
	return k, nil
}
