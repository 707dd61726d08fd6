package kgctl

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/kilofed/kilofed/mesh/agent"
	"github.com/kilofed/kilofed/mesh/apis/kilo/v1alpha1"
	"github.com/kilofed/kilofed/mesh/k8s"
	"github.com/kilofed/kilofed/mesh/topology"
	"github.com/kilofed/kilofed/mesh/topology/wgconf"
	"github.com/kilofed/kilofed/mesh/wireguard"
	"log/slog"
)

// DefaultKeyFile returns where connect keeps the private key of peer:
// $XDG_CONFIG_HOME/kilofed/PEER.key, else ~/.config/kilofed/PEER.key.
func DefaultKeyFile(peer string) string {
	dir, err := os.UserConfigDir()
	if err != nil {
		dir = "."
	}
	return filepath.Join(dir, "kilofed", peer+".key")
}

func connectCommand() Command {
	c := Command{
		Name:    "connect",
		Usage:   "connect PEER [--private-key-file FILE] [--create --allowed-ips CIDR,...] [flags]",
		Summary: "join this machine to the mesh as the Peer PEER, until Ctrl-C",
	}
	c.Run = func(ctx context.Context, env *Env, args []string) error {
		var (
			m          meshFlagSet
			keyFile    string
			create     bool
			allowedIPs []string
			keepalive  int
			cfg        = ConnectConfig{Mode: wireguard.ModeAuto}
			netns      string
		)
		fs := newFlagSet(env, c, `
Join this machine to the mesh as the Peer PEER: bring up a WireGuard interface
(kernel WireGuard, or wireguard-go inside this process when the kernel has no
module) configured as `+env.Program+` showconf peer PEER prints it, with the
Peer's addresses and a route for every range of the mesh. The configuration
follows the mesh (a new location leader, a rotated key, a new endpoint) until
Ctrl-C, which removes the interface and its routes. Needs root.

The Peer must exist with this machine's public key; --create creates it, with
a new key pair whose private half goes to --private-key-file:
  `+env.Program+` connect seb-laptop --create --allowed-ips 10.5.100.10/32`)
		fs.StringVar(&keyFile, "private-key-file", "", "file holding this machine's private key (default "+DefaultKeyFile("PEER")+")")
		fs.BoolVar(&create, "create", false, "create the Peer (and a key in --private-key-file if it does not exist)")
		fs.StringSliceVar(&allowedIPs, "allowed-ips", nil, "with --create: the Peer's allowed IPs, such as 10.5.100.10/32")
		fs.IntVar(&keepalive, "persistent-keepalive", 25, "with --create: the Peer's persistentKeepalive in seconds")
		fs.StringVar(&cfg.Interface, "interface", DefaultConnectInterface, "name of the WireGuard interface")
		fs.Var(&cfg.Mode, "wireguard", "WireGuard implementation: auto, kernel or userspace (embedded wireguard-go)")
		fs.IntVar(&cfg.MTU, "mtu", 0, "MTU of the interface (default WireGuard's 1420)")
		fs.StringVar(&netns, "netns", "", "connect this network namespace (a name from ip netns, or a path) instead of the host")
		m.register(fs)
		if err := parseFlags(fs, args); err != nil {
			return err
		}
		if fs.NArg() != 1 {
			return fmt.Errorf("%w: want one PEER name, got %q", ErrUsage, fs.Args())
		}
		cfg.Peer = fs.Arg(0)
		allowed, err := parseCIDRs("--allowed-ips", allowedIPs)
		if err != nil {
			return err
		}
		if create != (len(allowed) > 0) {
			return fmt.Errorf("%w: --create needs --allowed-ips, and --allowed-ips needs --create", ErrUsage)
		}
		if keyFile == "" {
			keyFile = DefaultKeyFile(cfg.Peer)
		}
		if netns != "" && !strings.Contains(netns, "/") {
			netns = "/run/netns/" + netns
		}
		cfg.NetNS = netns
		if cfg.Flags, err = m.flags(); err != nil {
			return err
		}
		src, err := env.source(ctx, m.backend)
		if err != nil {
			return err
		}
		if create {
			spec := v1alpha1.PeerSpec{AllowedIPs: prefixStrings(allowed), PersistentKeepalive: keepalive}
			cfg.PrivateKey, err = createPeer(ctx, env, src, cfg.Peer, keyFile, spec)
		} else {
			cfg.PrivateKey, err = ReadKeyFile(keyFile)
			if errors.Is(err, os.ErrNotExist) {
				err = fmt.Errorf("%w; pass --private-key-file with the key whose public half is Peer %s's publicKey, or --create --allowed-ips CIDR to create the Peer and a key",
					err, cfg.Peer)
			}
		}
		if err != nil {
			return err
		}
		cfg.Source, cfg.Out, cfg.Logger = src, env.Stdout, env.logger()
		return Connect(ctx, cfg)
	}
	return c
}

// createPeer makes sure Peer name exists with the key of keyFile (created
// if missing), creating the Peer with spec if needed, and waits until the
// source sees it. It returns the private key.
func createPeer(ctx context.Context, env *Env, src Source, name, keyFile string, spec v1alpha1.PeerSpec) (wgconf.SecretKey, error) {
	key, created, err := agent.LoadOrCreateKey(keyFile, slog.New(slog.NewTextHandler(env.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn})))
	if err != nil {
		return key, err
	}
	if created {
		fmt.Fprintf(env.Stderr, "%s: new private key in %s (public key %s)\n", env.Program, keyFile, key.PublicKey())
	}
	has := func() (topology.Peer, bool) {
		ps := src.Snapshot().Peers
		i := slices.IndexFunc(ps, func(p topology.Peer) bool { return p.Name == name })
		if i < 0 {
			return topology.Peer{}, false
		}
		return ps[i], true
	}
	if p, ok := has(); ok {
		return key, checkKey(name, p.PublicKey, key)
	}
	creator, ok := src.(PeerCreator)
	if !ok {
		return key, fmt.Errorf("create peer %s: this source cannot create Peers", name)
	}
	spec.PublicKey = key.PublicKey().String()
	p := &v1alpha1.Peer{
		TypeMeta:   metav1.TypeMeta{APIVersion: v1alpha1.SchemeGroupVersion.String(), Kind: v1alpha1.PeerKind},
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec:       spec,
	}
	if err := creator.CreatePeer(ctx, p); err != nil {
		if errors.Is(err, k8s.ErrAlreadyExists) {
			return key, fmt.Errorf("%w; the existing Peer %s is not valid for the mesh: kubectl get peer %s -o yaml", err, name, name)
		}
		return key, err
	}
	fmt.Fprintf(env.Stderr, "%s: created Peer %s (allowed IPs %s)\n", env.Program, name, strings.Join(spec.AllowedIPs, ", "))
	deadline := time.After(10 * time.Second)
	for {
		if _, ok := has(); ok {
			return key, nil
		}
		select {
		case <-ctx.Done():
			return key, ctx.Err()
		case <-deadline:
			return key, fmt.Errorf("created Peer %s but the mesh does not see it after 10s: check kubectl get peer %s", name, name)
		case <-src.Changes():
		case <-time.After(100 * time.Millisecond):
		}
	}
}
