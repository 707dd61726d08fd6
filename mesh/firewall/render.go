package firewall

import (
	"fmt"
	"net/netip"
	"slices"
	"strconv"
	"strings"
)

// Family is an IP version of the packet filter: iptables or ip6tables.
type Family int

const (
	// IPv4 is iptables.
	IPv4 Family = 4
	// IPv6 is ip6tables.
	IPv6 Family = 6
)

// Chain names; each is reached by a jump from the builtin chain in From.
const (
	ForwardChain = "KILOFED-FORWARD"
	InputChain   = "KILOFED-INPUT"
	NATChain     = "KILOFED-NAT"
)

// Chain is one of kilofed's chains with its rules, rendered as iptables
// arguments in the form iptables -S prints them.
type Chain struct {
	// Table is the iptables table: filter or nat.
	Table string
	// Name is the chain.
	Name string
	// From is the builtin chain that jumps to Name.
	From string
	// Rules are the rule specifications, without "-A Name".
	Rules [][]string
}

// Jump returns the rule specification of the jump from c.From to c.
func (c Chain) Jump() []string {
	return []string{"-m", "comment", "--comment", "kilofed", "-j", c.Name}
}

// Lines returns the rules as iptables -S prints them.
func (c Chain) Lines() []string {
	out := make([]string, len(c.Rules))
	for i, r := range c.Rules {
		out[i] = "-A " + c.Name + " " + strings.Join(r, " ")
	}
	return out
}

// Render turns rules into the chains of one family; the chains are always
// all present, possibly empty.
func Render(rules Rules, fam Family) ([]Chain, error) {
	if err := validate(rules); err != nil {
		return nil, err
	}
	fwd := Chain{Table: "filter", Name: ForwardChain, From: "FORWARD"}
	for _, f := range rules.Forward {
		r := f.Range.Masked()
		if r.IsValid() && familyOf(r.Addr()) != fam {
			continue
		}
		switch {
		case f.Link != "" && r.IsValid():
			fwd.Rules = append(fwd.Rules,
				[]string{"-d", r.String(), "-o", f.Link, "-j", "ACCEPT"},
				[]string{"-s", r.String(), "-i", f.Link, "-j", "ACCEPT"})
		case r.IsValid():
			fwd.Rules = append(fwd.Rules,
				[]string{"-s", r.String(), "-j", "ACCEPT"},
				[]string{"-d", r.String(), "-j", "ACCEPT"})
		default:
			fwd.Rules = append(fwd.Rules,
				[]string{"-i", f.Link, "-j", "ACCEPT"},
				[]string{"-o", f.Link, "-j", "ACCEPT"})
		}
	}
	in := Chain{Table: "filter", Name: InputChain, From: "INPUT"}
	in.Rules = append(in.Rules, renderTunnel(rules.Tunnel, fam)...)
	for _, p := range rules.AcceptUDP {
		in.Rules = append(in.Rules, []string{"-p", "udp", "-m", "udp", "--dport", strconv.Itoa(int(p)), "-j", "ACCEPT"})
	}
	nat := Chain{Table: "nat", Name: NATChain, From: "POSTROUTING"}
	for _, m := range rules.Masquerade {
		src := m.Src.Masked()
		if familyOf(src.Addr()) != fam {
			continue
		}
		for _, e := range m.Except {
			if e = e.Masked(); e.IsValid() && familyOf(e.Addr()) == fam {
				nat.Rules = append(nat.Rules, []string{"-s", src.String(), "-d", e.String(), "-j", "RETURN"})
			}
		}
		nat.Rules = append(nat.Rules, []string{"-s", src.String(), "-j", "MASQUERADE"})
	}
	for _, c := range []*Chain{&fwd, &in, &nat} {
		c.Rules = dedupe(c.Rules)
	}
	return []Chain{fwd, in, nat}, nil
}

// ipipProto is IP protocol 4 as rendered; iptables -S prints it by the
// name /etc/protocols gives it, which the adapter maps back.
const ipipProto = "4"

// renderTunnel accepts tunnel packets from each remote of fam, then drops
// the others.
func renderTunnel(t Tunnel, fam Family) [][]string {
	var match []string
	switch t.Kind {
	case TunnelIPIP:
		match = []string{"-p", ipipProto}
	case TunnelVXLAN:
		match = []string{"-p", "udp", "-m", "udp", "--dport", strconv.Itoa(int(t.Port))}
	default:
		return nil
	}
	var out [][]string
	for _, r := range t.Remotes {
		r = r.Unmap()
		if familyOf(r) != fam {
			continue
		}
		src := netip.PrefixFrom(r, r.BitLen()).String()
		out = append(out, append(append([]string{"-s", src}, match...), "-j", "ACCEPT"))
	}
	return append(out, append(slices.Clone(match), "-j", "DROP"))
}

// Format writes the chains of both families as text, for golden files.
func Format(rules Rules) (string, error) {
	var b strings.Builder
	for _, fam := range []Family{IPv4, IPv6} {
		chains, err := Render(rules, fam)
		if err != nil {
			return "", err
		}
		for _, c := range chains {
			fmt.Fprintf(&b, "ip%d %s %s (from %s)\n", fam, c.Table, c.Name, c.From)
			for _, l := range c.Lines() {
				fmt.Fprintf(&b, "  %s\n", l)
			}
		}
	}
	return b.String(), nil
}

func validate(rules Rules) error {
	for _, f := range rules.Forward {
		if f.Link == "" && !f.Range.IsValid() {
			return fmt.Errorf("%w: a Forward needs a Link or a Range", ErrInvalid)
		}
		if strings.ContainsAny(f.Link, " \t\"'") {
			return fmt.Errorf("%w: link name %q", ErrInvalid, f.Link)
		}
	}
	for _, m := range rules.Masquerade {
		if !m.Src.IsValid() {
			return fmt.Errorf("%w: a Masquerade needs a Src range", ErrInvalid)
		}
	}
	for _, p := range rules.AcceptUDP {
		if p == 0 {
			return fmt.Errorf("%w: UDP port 0", ErrInvalid)
		}
	}
	switch t := rules.Tunnel; t.Kind {
	case "", TunnelIPIP:
	case TunnelVXLAN:
		if t.Port == 0 {
			return fmt.Errorf("%w: a VXLAN tunnel filter needs its UDP port", ErrInvalid)
		}
	default:
		return fmt.Errorf("%w: tunnel kind %q (use %q or %q)", ErrInvalid, t.Kind, TunnelIPIP, TunnelVXLAN)
	}
	for _, r := range rules.Tunnel.Remotes {
		if !r.IsValid() {
			return fmt.Errorf("%w: invalid tunnel remote address", ErrInvalid)
		}
	}
	return nil
}

// dedupe drops repeated rules, keeping the first: they would be no-ops.
func dedupe(rules [][]string) [][]string {
	var out [][]string
	for _, r := range rules {
		if !slices.ContainsFunc(out, func(o []string) bool { return slices.Equal(o, r) }) {
			out = append(out, r)
		}
	}
	return out
}

func familyOf(a netip.Addr) Family {
	if a.Unmap().Is4() {
		return IPv4
	}
	return IPv6
}
