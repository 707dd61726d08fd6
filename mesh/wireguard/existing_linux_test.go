//go:build linux

package wireguard_test

import (
	"context"
	"testing"

	"github.com/kilofed/kilofed/mesh/link/linktest"
	"github.com/kilofed/kilofed/mesh/topology/wgconf"
	"github.com/kilofed/kilofed/mesh/wireguard"
)

// TestPrivilegedExistingInterfaceIsAdoptedNotCreated checks Kilo's
// --create-interface=false set-up: another WireGuard (here an embedded
// wireguard-go, as a sidecar would run) made the interface, and Open with
// Existing configures it without creating or replacing anything.
func TestPrivilegedExistingInterfaceIsAdoptedNotCreated(t *testing.T) {
	requireTUN(t)
	ns := linktest.NetNS(t)
	sidecar := newNode(t, ns, "10.4.0.1/32", wireguard.ModeUserspace)

	d, err := wireguard.Open(context.Background(), wireguard.OpenOptions{
		Name: sidecar.name, Existing: true, NetNS: linktest.Path(ns), Logger: testLogger(t),
	})
	if err != nil {
		t.Fatalf("Open existing %s: %v", sidecar.name, err)
	}
	t.Cleanup(func() { d.Close() })
	if err := d.Set(context.Background(), wgconf.Config{PrivateKey: sidecar.key, ListenPort: 51999}); err != nil {
		t.Fatalf("Set through the adopted device: %v", err)
	}
	s, err := sidecar.dev.Show(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if s.ListenPort != 51999 || s.Type != "userspace" {
		t.Errorf("sidecar's device: port %d, type %q; want 51999 set through the adopted device, still userspace", s.ListenPort, s.Type)
	}

	missing := linktest.Name(t, "wg")
	if d, err := wireguard.Open(context.Background(), wireguard.OpenOptions{
		Name: missing, Existing: true, NetNS: linktest.Path(ns), Logger: testLogger(t),
	}); err == nil {
		d.Close()
		t.Errorf("Open existing %s succeeded, but nothing made it", missing)
	}
	if out, err := linktest.Exec(ns, "ip", "link", "show", missing); err == nil {
		t.Errorf("Open with Existing created %s:\n%s", missing, out)
	}
}
