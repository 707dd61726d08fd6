//go:build linux

package firewall

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"strings"
	"sync"

	"github.com/coreos/go-iptables/iptables"
)

// New returns a Firewall that drives iptables and ip6tables (nft or legacy
// backend, whichever the commands use) in the calling process's network
// namespace. It fails with ErrUnavailable when the commands are missing or
// cannot read the filter and nat tables.
func New(opts Options) (Firewall, error) {
	log := opts.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	fw := &iptablesFirewall{log: log}
	fams := []Family{IPv4}
	if !opts.DisableIPv6 {
		fams = append(fams, IPv6)
	}
	for _, fam := range fams {
		proto, cmd := iptables.ProtocolIPv4, "iptables"
		if fam == IPv6 {
			proto, cmd = iptables.ProtocolIPv6, "ip6tables"
		}
		ipt, err := iptables.New(iptables.IPFamily(proto), iptables.Timeout(5))
		if err != nil {
			return nil, fmt.Errorf("%w: %s: %w (install the iptables package on the node)", ErrUnavailable, cmd, err)
		}
		for _, table := range []string{"filter", "nat"} {
			if _, err := ipt.ListChains(table); err != nil {
				return nil, fmt.Errorf("%w: %s cannot read the %s table (missing kernel support or privileges): %w",
					ErrUnavailable, cmd, table, err)
			}
		}
		restore := findRestore(cmd)
		if restore == "" {
			log.Warn("firewall: "+cmd+"-restore not found; long chains are written one rule at a time",
				"family", fmt.Sprintf("ip%d", fam))
		}
		fw.families = append(fw.families, family{fam: fam, ipt: ipt, restore: restore})
	}
	return fw, nil
}

type family struct {
	fam Family
	ipt *iptables.IPTables
	// restore is the iptables-restore command of ipt's backend, or ""
	// when there is none: chains are then edited rule by rule.
	restore string
}

type iptablesFirewall struct {
	mu       sync.Mutex
	log      *slog.Logger
	families []family
	// edits counts rule, chain and jump changes (a chain written whole is
	// one), for tests.
	edits int
	// restores counts chains written whole, for tests.
	restores int
}

func (fw *iptablesFirewall) Set(ctx context.Context, rules Rules) error {
	fw.mu.Lock()
	defer fw.mu.Unlock()
	if err := validate(rules); err != nil {
		return err
	}
	if len(fw.families) == 1 && hasIPv6(rules) {
		return fmt.Errorf("%w: IPv6 ranges given but IPv6 is disabled", ErrInvalid)
	}
	var errs []error
	for i := range fw.families {
		f := &fw.families[i]
		if err := ctx.Err(); err != nil {
			return err
		}
		chains, err := Render(rules, f.fam)
		if err != nil {
			return err
		}
		for _, c := range chains {
			if err := fw.syncChain(ctx, f, c); err != nil {
				errs = append(errs, fmt.Errorf("ip%d %s %s: %w", f.fam, c.Table, c.Name, err))
			}
		}
	}
	return errors.Join(errs...)
}

// syncChain brings c's rules into place, by edits when planChain gives a
// few, else (or when c is new) by writing the chain whole in one
// iptables-restore (when that fails, by edits, and by edits only from then
// on), and makes sure the jump to it exists.
func (fw *iptablesFirewall) syncChain(ctx context.Context, f *family, c Chain) error {
	ok, err := f.ipt.ChainExists(c.Table, c.Name)
	if err != nil {
		return err
	}
	var ops []op
	if ok {
		listed, err := f.ipt.List(c.Table, c.Name)
		if err != nil {
			return err
		}
		var current []string
		for _, l := range listed {
			if strings.HasPrefix(l, "-A ") {
				current = append(current, canonicalLine(l))
			}
		}
		ops = planChain(current, c.Lines())
	}
	written := false
	if f.restore != "" && (!ok || len(ops) > restoreAbove) {
		err := restoreChain(ctx, *f, c)
		switch {
		case err == nil:
			written = true
			fw.restores++
			fw.edits++
			fw.log.Info("firewall chain written", "family", fmt.Sprintf("ip%d", f.fam), "table", c.Table,
				"chain", c.Name, "rules", len(c.Rules))
		case ctx.Err() != nil:
			return err
		default:
			// A restore applies all or nothing: the chain is as it was,
			// and the edits below bring it into place.
			fw.log.Warn("firewall: writing a chain whole failed; chains are edited rule by rule from now on",
				"family", fmt.Sprintf("ip%d", f.fam), "table", c.Table, "chain", c.Name, "err", err)
			f.restore = ""
		}
	}
	if !written {
		if !ok {
			if err := f.ipt.NewChain(c.Table, c.Name); err != nil {
				return err
			}
			fw.changed(*f, "chain created", c.Name)
			ops = planChain(nil, c.Lines())
		}
		if err := fw.editChain(*f, c, ops); err != nil {
			return err
		}
	}
	ok, err = f.ipt.Exists(c.Table, c.From, c.Jump()...)
	if err != nil {
		return err
	}
	if !ok {
		// First, so that a DROP or REJECT someone appended does not
		// shadow the mesh.
		if err := f.ipt.Insert(c.Table, c.From, 1, c.Jump()...); err != nil {
			return err
		}
		fw.changed(*f, "jump inserted", c.From+" -> "+c.Name)
	}
	return nil
}

// editChain applies ops to c one iptables run each.
func (fw *iptablesFirewall) editChain(f family, c Chain, ops []op) error {
	byLine := make(map[string][]string, len(c.Rules))
	for i, l := range c.Lines() {
		byLine[l] = c.Rules[i]
	}
	for _, o := range ops {
		var err error
		if o.insert {
			err = f.ipt.Insert(c.Table, c.Name, o.pos, byLine[o.line]...)
		} else {
			err = f.ipt.Delete(c.Table, c.Name, strconv.Itoa(o.pos))
		}
		if err != nil {
			return err
		}
		fw.changed(f, map[bool]string{true: "rule inserted", false: "rule deleted"}[o.insert], o.line)
	}
	return nil
}

func (fw *iptablesFirewall) changed(f family, what, detail string) {
	fw.edits++
	fw.log.Info("firewall "+what, "family", fmt.Sprintf("ip%d", f.fam), "rule", detail)
}

func (fw *iptablesFirewall) Close(ctx context.Context) error {
	fw.mu.Lock()
	defer fw.mu.Unlock()
	var errs []error
	for _, f := range fw.families {
		chains, _ := Render(Rules{}, f.fam)
		for _, c := range chains {
			for range 10 { // a jump can have been added more than once
				ok, err := f.ipt.Exists(c.Table, c.From, c.Jump()...)
				if err != nil || !ok {
					errs = append(errs, err)
					break
				}
				if err := f.ipt.Delete(c.Table, c.From, c.Jump()...); err != nil {
					errs = append(errs, err)
					break
				}
			}
			ok, err := f.ipt.ChainExists(c.Table, c.Name)
			if err == nil && ok {
				err = f.ipt.ClearAndDeleteChain(c.Table, c.Name)
			}
			if err != nil {
				errs = append(errs, fmt.Errorf("ip%d remove %s %s: %w", f.fam, c.Table, c.Name, err))
			}
		}
	}
	return errors.Join(errs...)
}

// ipipNames are the names /etc/protocols files give IP protocol 4, which
// iptables -S prints instead of the number the rules are written with.
var ipipNames = map[string]bool{"ipencap": true, "ipv4": true, "ip-encap": true, "ipip": true}

// canonicalLine writes a listed rule's protocol as Render does.
func canonicalLine(l string) string {
	f := strings.Fields(l)
	for i := 1; i < len(f); i++ {
		if f[i-1] == "-p" && ipipNames[strings.ToLower(f[i])] {
			f[i] = ipipProto
			return strings.Join(f, " ")
		}
	}
	return l
}

func hasIPv6(r Rules) bool {
	for _, a := range r.Tunnel.Remotes {
		if familyOf(a) == IPv6 {
			return true
		}
	}
	for _, f := range r.Forward {
		if f.Range.IsValid() && familyOf(f.Range.Addr()) == IPv6 {
			return true
		}
	}
	for _, m := range r.Masquerade {
		if familyOf(m.Src.Addr()) == IPv6 {
			return true
		}
	}
	return false
}
