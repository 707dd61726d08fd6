//go:build linux

package firewall

import (
	"context"
	"net/netip"
	"slices"
	"strings"
	"testing"

	"github.com/kilofed/kilofed/mesh/link/linktest"
)

// chainLines lists a chain with iptables -S inside the namespace, without
// its -N line; a missing chain gives nil.
func chainLines(t *testing.T, ns, cmd, table, chain string) []string {
	t.Helper()
	out, err := linktest.Exec(ns, cmd, "-w", "-t", table, "-S", chain)
	if err != nil {
		return nil
	}
	var lines []string
	for _, l := range strings.Split(strings.TrimSpace(out), "\n") {
		if strings.HasPrefix(l, "-A ") {
			lines = append(lines, canonicalLine(l))
		}
	}
	return lines
}

func hasJump(ns, cmd string, c Chain) bool {
	_, err := linktest.Exec(ns, append([]string{cmd, "-w", "-t", c.Table, "-C", c.From}, c.Jump()...)...)
	return err == nil
}

func TestPrivilegedFirewall(t *testing.T) {
	linktest.Require(t)
	linktest.RequireBinary(t, "iptables")
	linktest.RequireBinary(t, "ip6tables")
	ns := linktest.NetNS(t)
	var fw Firewall
	linktest.Run(t, ns, func() (err error) {
		fw, err = New(Options{Logger: nil})
		return err
	})
	ipt := fw.(*iptablesFirewall)
	mesh := []netip.Prefix{pfx("10.1.0.0/16"), pfx("10.4.0.0/16"), pfx("fd01::/48")}
	rules := Rules{
		Forward: []Forward{
			{Link: "kilo0", Range: pfx("10.2.0.0/24")},
			{Link: "kilo0", Range: pfx("fd02::/64")},
			{Range: pfx("10.1.0.0/24")},
		},
		Masquerade: []Masquerade{
			{Src: pfx("10.1.0.0/24"), Except: mesh},
			{Src: pfx("fd01:0:0:1::/64"), Except: mesh},
		},
		AcceptUDP: []uint16{51820},
		// iptables -S prints protocol 4 by its /etc/protocols name: a
		// second Set must still find nothing to change.
		Tunnel: Tunnel{Kind: TunnelIPIP, Remotes: []netip.Addr{netip.MustParseAddr("10.0.0.2"), netip.MustParseAddr("10.0.0.3")}},
	}
	set := func(r Rules) int {
		t.Helper()
		before := ipt.edits
		linktest.Run(t, ns, func() error { return fw.Set(context.Background(), r) })
		return ipt.edits - before
	}
	check := func(step string, r Rules) {
		t.Helper()
		for _, fam := range []Family{IPv4, IPv6} {
			cmd := map[Family]string{IPv4: "iptables", IPv6: "ip6tables"}[fam]
			chains, err := Render(r, fam)
			if err != nil {
				t.Fatal(err)
			}
			for _, c := range chains {
				if got := chainLines(t, ns, cmd, c.Table, c.Name); !slices.Equal(got, c.Lines()) {
					t.Errorf("%s: %s -t %s -S %s:\n%s\nwant:\n%s", step, cmd, c.Table, c.Name,
						strings.Join(got, "\n"), strings.Join(c.Lines(), "\n"))
				}
				if !hasJump(ns, cmd, c) {
					t.Errorf("%s: %s: no jump from %s to %s", step, cmd, c.From, c.Name)
				}
			}
		}
	}

	if n := set(rules); n == 0 {
		t.Fatal("first Set made no changes")
	}
	check("first Set", rules)
	if n := set(rules); n != 0 {
		t.Errorf("second Set with the same rules made %d changes, want 0", n)
	}

	// Someone deletes a NAT rule and a jump, and appends a rule of theirs
	// to our chain: Set puts everything back with three edits.
	for _, args := range [][]string{
		{"iptables", "-w", "-t", "nat", "-D", NATChain, "2"},
		{"ip6tables", "-w", "-D", "FORWARD", "-m", "comment", "--comment", "kilofed", "-j", ForwardChain},
		{"iptables", "-w", "-A", InputChain, "-j", "DROP"},
	} {
		if out, err := linktest.Exec(ns, args...); err != nil {
			t.Fatalf("%v: %v: %s", args, err, out)
		}
	}
	if n := set(rules); n != 3 {
		t.Errorf("repairing Set made %d changes, want 3", n)
	}
	check("after repair", rules)

	// A whole chain deleted by hand comes back.
	for _, args := range [][]string{
		{"iptables", "-w", "-D", "INPUT", "-m", "comment", "--comment", "kilofed", "-j", InputChain},
		{"iptables", "-w", "-F", InputChain},
		{"iptables", "-w", "-X", InputChain},
	} {
		if out, err := linktest.Exec(ns, args...); err != nil {
			t.Fatalf("%v: %v: %s", args, err, out)
		}
	}
	set(rules)
	check("after chain deletion", rules)

	fewer := Rules{Forward: rules.Forward[:1], AcceptUDP: []uint16{51821},
		Tunnel: Tunnel{Kind: TunnelVXLAN, Port: 4789, Remotes: []netip.Addr{netip.MustParseAddr("fd00::2")}}}
	set(fewer)
	check("fewer rules", fewer)

	linktest.Run(t, ns, func() error { return fw.Close(context.Background()) })
	for _, cmd := range []string{"iptables", "ip6tables"} {
		for _, table := range []string{"filter", "nat"} {
			out, err := linktest.Exec(ns, cmd, "-w", "-t", table, "-S")
			if err != nil || strings.Contains(out, "KILOFED") {
				t.Errorf("after Close, %s -t %s -S: %v\n%s", cmd, table, err, out)
			}
		}
	}
}

func TestCanonicalLineWritesProtocolFourAsRendered(t *testing.T) {
	tests := []struct{ name, listed, want string }{
		{name: "debian name", listed: "-A KILOFED-INPUT -s 10.0.0.2/32 -p ipencap -j ACCEPT", want: "-A KILOFED-INPUT -s 10.0.0.2/32 -p 4 -j ACCEPT"},
		{name: "iana name", listed: "-A KILOFED-INPUT -p ipv4 -j DROP", want: "-A KILOFED-INPUT -p 4 -j DROP"},
		{name: "number kept", listed: "-A KILOFED-INPUT -p 4 -j DROP", want: "-A KILOFED-INPUT -p 4 -j DROP"},
		{name: "udp untouched", listed: "-A KILOFED-INPUT -p udp -m udp --dport 4789 -j DROP", want: "-A KILOFED-INPUT -p udp -m udp --dport 4789 -j DROP"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := canonicalLine(tt.listed); got != tt.want {
				t.Errorf("canonicalLine(%q) = %q, want %q", tt.listed, got, tt.want)
			}
		})
	}
}
