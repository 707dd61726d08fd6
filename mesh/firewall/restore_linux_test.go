//go:build linux

package firewall

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"net/netip"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/kilofed/kilofed/mesh/link/linktest"
)

func TestRestoreCommandMatchesTheIptablesBackend(t *testing.T) {
	// files maps a path to what it resolves to; a path not in it is missing.
	tests := []struct {
		name, path, version string
		files               map[string]string
		want                string
	}{
		{name: "nft backend takes the nft restore next to iptables",
			path: "/usr/sbin/iptables", version: "iptables v1.8.9 (nf_tables)",
			files: map[string]string{"/usr/sbin/iptables-nft-restore": "/usr/sbin/xtables-nft-multi",
				"/usr/sbin/iptables-restore": "/usr/sbin/xtables-legacy-multi"},
			want: "/usr/sbin/iptables-nft-restore"},
		{name: "legacy backend takes the legacy restore",
			path: "/usr/sbin/ip6tables", version: "ip6tables v1.8.9 (legacy)",
			files: map[string]string{"/usr/sbin/ip6tables-legacy-restore": "/usr/sbin/xtables-legacy-multi",
				"/usr/sbin/ip6tables-nft-restore": "/usr/sbin/xtables-nft-multi"},
			want: "/usr/sbin/ip6tables-legacy-restore"},
		{name: "plain restore of the same multi binary",
			path: "/sbin/iptables", version: "iptables v1.8.7 (nf_tables)",
			files: map[string]string{"/sbin/iptables": "/sbin/xtables-nft-multi", "/sbin/iptables-restore": "/sbin/xtables-nft-multi"},
			want:  "/sbin/iptables-restore"},
		{name: "plain restore of the other backend is refused",
			path: "/sbin/iptables", version: "iptables v1.8.7 (nf_tables)",
			files: map[string]string{"/sbin/iptables": "/sbin/xtables-nft-multi", "/sbin/iptables-restore": "/sbin/xtables-legacy-multi"},
			want:  ""},
		{name: "old iptables without a backend takes the plain restore",
			path: "/sbin/iptables", version: "iptables v1.6.1",
			files: map[string]string{"/sbin/iptables": "/sbin/iptables", "/sbin/iptables-restore": "/sbin/iptables-restore"},
			want:  "/sbin/iptables-restore"},
		{name: "no restore command",
			path: "/sbin/iptables", version: "iptables v1.8.9 (nf_tables)",
			files: map[string]string{"/sbin/iptables": "/sbin/xtables-nft-multi"},
			want:  ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			resolve := func(p string) (string, error) {
				if r, ok := tt.files[p]; ok {
					return r, nil
				}
				if p == tt.path {
					return p, nil
				}
				return "", fmt.Errorf("%s: no such file", p)
			}
			if got := restoreCommand(tt.path, tt.version, resolve); got != tt.want {
				t.Errorf("restoreCommand(%q, %q) = %q, want %q", tt.path, tt.version, got, tt.want)
			}
		})
	}
}

func TestRestoreInputDeclaresOnlyTheChainAndItsRules(t *testing.T) {
	c := Chain{Table: "nat", Name: NATChain, From: "POSTROUTING", Rules: [][]string{
		{"-s", "10.1.0.0/24", "-d", "10.4.0.0/16", "-j", "RETURN"},
		{"-s", "10.1.0.0/24", "-j", "MASQUERADE"},
	}}
	want := "*nat\n:KILOFED-NAT - [0:0]\n" +
		"-A KILOFED-NAT -s 10.1.0.0/24 -d 10.4.0.0/16 -j RETURN\n" +
		"-A KILOFED-NAT -s 10.1.0.0/24 -j MASQUERADE\nCOMMIT\n"
	if got := restoreInput(c); got != want {
		t.Errorf("restoreInput:\n%s\nwant:\n%s", got, want)
	}
}

// meshRules gives about n rules in IPv4: a masquerade exception per mesh
// range, as an agent of an n-node cluster has.
func meshRules(n int) Rules {
	var except []netip.Prefix
	for i := range n - 8 {
		except = append(except, netip.PrefixFrom(netip.AddrFrom4([4]byte{10, byte(64 + i/256), byte(i % 256), 0}), 24))
	}
	return Rules{
		Forward:    []Forward{{Link: "kilo0", Range: pfx("10.2.0.0/24")}, {Range: pfx("10.1.0.0/24")}},
		Masquerade: []Masquerade{{Src: pfx("10.1.0.0/24"), Except: except}},
		AcceptUDP:  []uint16{51820},
		Tunnel:     Tunnel{Kind: TunnelIPIP, Remotes: []netip.Addr{netip.MustParseAddr("10.0.0.2")}},
	}
}

func countRules(t testing.TB, r Rules) int {
	t.Helper()
	chains, err := Render(r, IPv4)
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, c := range chains {
		n += len(c.Rules)
	}
	return n
}

// newNSFirewall makes an IPv4 firewall inside a fresh namespace.
func newNSFirewall(t testing.TB, log *slog.Logger) (string, *iptablesFirewall) {
	t.Helper()
	linktest.Require(t)
	linktest.RequireBinary(t, "iptables")
	ns := linktest.NetNS(t)
	var fw Firewall
	linktest.Run(t, ns, func() (err error) {
		fw, err = New(Options{Logger: log, DisableIPv6: true})
		return err
	})
	return ns, fw.(*iptablesFirewall)
}

func checkChains(t *testing.T, ns string, r Rules) {
	t.Helper()
	chains, err := Render(r, IPv4)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range chains {
		if got := chainLines(t, ns, "iptables", c.Table, c.Name); !slices.Equal(got, c.Lines()) {
			t.Errorf("iptables -t %s -S %s: %d rules, want %d:\n%s", c.Table, c.Name, len(got), len(c.Rules),
				strings.Join(got, "\n"))
		}
		if !hasJump(ns, "iptables", c) {
			t.Errorf("no jump from %s to %s", c.From, c.Name)
		}
	}
}

func TestPrivilegedLargeChainIsWrittenInOneRestoreAndSmallChangesAreEdits(t *testing.T) {
	ns, fw := newNSFirewall(t, nil)
	if fw.families[0].restore == "" {
		t.Skip("no iptables-restore")
	}
	// A chain of someone else in the nat table must survive the restore.
	for _, args := range [][]string{
		{"iptables", "-w", "-t", "nat", "-N", "OTHER"},
		{"iptables", "-w", "-t", "nat", "-A", "OTHER", "-j", "RETURN"},
	} {
		if out, err := linktest.Exec(ns, args...); err != nil {
			t.Fatalf("%v: %v: %s", args, err, out)
		}
	}
	set := func(r Rules) (edits, restores int) {
		t.Helper()
		e, n := fw.edits, fw.restores
		linktest.Run(t, ns, func() error { return fw.Set(context.Background(), r) })
		return fw.edits - e, fw.restores - n
	}
	rules := meshRules(436)
	if n := countRules(t, rules); n != 436 {
		t.Fatalf("meshRules(436) gives %d rules", n)
	}
	// Three new chains: three restores, three jumps.
	if edits, restores := set(rules); restores != 3 || edits != 6 {
		t.Errorf("first Set: %d restores, %d edits; want 3 and 6", restores, edits)
	}
	checkChains(t, ns, rules)
	if edits, restores := set(rules); restores != 0 || edits != 0 {
		t.Errorf("second Set: %d restores, %d edits; want none", restores, edits)
	}
	if got := chainLines(t, ns, "iptables", "nat", "OTHER"); !slices.Equal(got, []string{"-A OTHER -j RETURN"}) {
		t.Errorf("another chain after the restore: %q", got)
	}

	// A node added: one rule inserted in place, no restore.
	grown := meshRules(437)
	if edits, restores := set(grown); restores != 0 || edits != 1 {
		t.Errorf("one more range: %d restores, %d edits; want 0 and 1", restores, edits)
	}
	checkChains(t, ns, grown)

	// Half the cluster gone: the NAT chain is rewritten whole.
	shrunk := meshRules(200)
	if edits, restores := set(shrunk); restores != 1 || edits != 1 {
		t.Errorf("236 ranges fewer: %d restores, %d edits; want 1 and 1", restores, edits)
	}
	checkChains(t, ns, shrunk)
	if edits, _ := set(shrunk); edits != 0 {
		t.Errorf("Set after the rewrite made %d edits, want 0", edits)
	}
}

type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

func TestPrivilegedMissingRestoreFallsBackToEditsAndSaysSoOnce(t *testing.T) {
	was := findRestore
	findRestore = func(string) string { return "" }
	t.Cleanup(func() { findRestore = was })
	var logs lockedBuffer
	ns, fw := newNSFirewall(t, slog.New(slog.NewTextHandler(&logs, nil)))
	rules := meshRules(40)
	for range 2 {
		linktest.Run(t, ns, func() error { return fw.Set(context.Background(), rules) })
	}
	checkChains(t, ns, rules)
	if fw.restores != 0 {
		t.Errorf("%d restores without a restore command", fw.restores)
	}
	// 3 chains created, 40 rules, 3 jumps.
	if fw.edits != 46 {
		t.Errorf("%d edits, want 46", fw.edits)
	}
	if n := strings.Count(logs.String(), "iptables-restore not found"); n != 1 {
		t.Errorf("%d log lines about the missing restore command, want 1:\n%s", n, logs.String())
	}
}

func TestPrivilegedFailingRestoreFallsBackToEditsAndSaysSoOnce(t *testing.T) {
	var logs lockedBuffer
	ns, fw := newNSFirewall(t, slog.New(slog.NewTextHandler(&logs, nil)))
	if fw.families[0].restore == "" {
		t.Skip("no iptables-restore")
	}
	// A restore command that fails (an old one without -w, another
	// backend's, a lock held too long) must not leave the mesh without its
	// firewall.
	fw.families[0].restore = "/bin/false"
	rules := meshRules(40)
	for range 2 {
		linktest.Run(t, ns, func() error { return fw.Set(context.Background(), rules) })
	}
	checkChains(t, ns, rules)
	if fw.restores != 0 {
		t.Errorf("%d restores counted with a failing restore command", fw.restores)
	}
	if n := strings.Count(logs.String(), "rule by rule from now on"); n != 1 {
		t.Errorf("%d log lines about the failing restore command, want 1:\n%s", n, logs.String())
	}
}

// BenchmarkSetFreshFirewall writes a fresh firewall of 32, 436 and 2000
// rules, in one iptables-restore per chain and one iptables run per rule.
func BenchmarkSetFreshFirewall(b *testing.B) {
	for _, n := range []int{32, 436, 2000} {
		for _, path := range []string{"restore", "one-by-one"} {
			b.Run(fmt.Sprintf("rules=%d/%s", n, path), func(b *testing.B) {
				ns, fw := newNSFirewall(b, nil)
				if path == "one-by-one" {
					fw.families[0].restore = ""
				} else if fw.families[0].restore == "" {
					b.Skip("no iptables-restore")
				}
				rules := meshRules(n)
				b.ResetTimer()
				for range b.N {
					linktest.Run(b, ns, func() error { return fw.Set(context.Background(), rules) })
					b.StopTimer()
					linktest.Run(b, ns, func() error { return fw.Close(context.Background()) })
					b.StartTimer()
				}
			})
		}
	}
}
