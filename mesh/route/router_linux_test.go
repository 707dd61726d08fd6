//go:build linux

package route

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"

	"github.com/kilofed/kilofed/mesh/link"
	"github.com/kilofed/kilofed/mesh/link/linktest"

	"github.com/kilofed/kilofed/mesh/topology"
)

// countHandler counts log records: the Router logs one per kernel change.
type countHandler struct {
	slog.Handler
	n *atomic.Int64
}

func (h countHandler) Handle(ctx context.Context, r slog.Record) error {
	h.n.Add(1)
	return h.Handler.Handle(ctx, r)
}

// kernelRoutes lists, straight from netlink, the routes of every table
// with the given protocol, as "DST via GW dev NAME table N [onlink]".
func kernelRoutes(t *testing.T, ns string, proto int) []string {
	t.Helper()
	var out []string
	linktest.Run(t, ns, func() error {
		list, err := netlink.RouteListFiltered(netlink.FAMILY_ALL,
			&netlink.Route{Protocol: netlink.RouteProtocol(proto), Table: unix.RT_TABLE_UNSPEC},
			netlink.RT_FILTER_PROTOCOL|netlink.RT_FILTER_TABLE)
		if err != nil {
			return err
		}
		for _, r := range list {
			l, err := netlink.LinkByIndex(r.LinkIndex)
			if err != nil {
				return err
			}
			s := fmt.Sprintf("%s via %s dev %s table %d", r.Dst, r.Gw, l.Attrs().Name, r.Table)
			if r.Flags&int(netlink.FLAG_ONLINK) != 0 {
				s += " onlink"
			}
			out = append(out, s)
		}
		return nil
	})
	slices.Sort(out)
	return out
}

// kernelRules lists the rules with the given protocol as ip-rule text.
func kernelRules(t *testing.T, ns string, proto int) []string {
	t.Helper()
	var out []string
	for _, fam := range []string{"-4", "-6"} {
		for _, line := range strings.Split(linktest.IP(t, "-n", ns, fam, "rule", "show"), "\n") {
			if line = strings.TrimSpace(line); strings.HasSuffix(line, fmt.Sprintf(" proto %d", proto)) {
				out = append(out, line)
			}
		}
	}
	slices.Sort(out)
	return out
}

func TestPrivilegedRouter(t *testing.T) {
	linktest.Require(t)
	ns := linktest.NetNS(t)
	dev, peer := linktest.Name(t, "ra"), linktest.Name(t, "rb")
	linktest.Veth(t, ns, dev, "10.97.0.1/24", ns, peer, "")
	linktest.IP(t, "-n", ns, "addr", "add", "fd97::1/64", "dev", dev, "nodad")
	// Routes others own: one in main, one in our table.
	linktest.IP(t, "-n", ns, "route", "add", "10.50.0.0/24", "via", "10.97.0.2", "dev", dev)
	linktest.IP(t, "-n", ns, "route", "add", "10.51.0.0/24", "dev", dev, "table", "1107")
	foreign := func() string {
		return linktest.IP(t, "-n", ns, "route", "show", "table", "all", "10.50.0.0/24") +
			linktest.IP(t, "-n", ns, "route", "show", "table", "1107", "10.51.0.0/24")
	}
	foreignBefore := foreign()

	var changes atomic.Int64
	log := slog.New(countHandler{slog.NewTextHandler(testWriter{t}, nil), &changes})
	var r Router
	linktest.Run(t, ns, func() (err error) {
		r, err = NewRouter(RouterOptions{Logger: log})
		return err
	})
	set := func(routes []topology.Route, rules []topology.Rule) (err error) {
		t.Helper()
		changes.Store(0)
		linktest.Run(t, ns, func() error {
			err = r.Set(context.Background(), routes, rules)
			return nil
		})
		return err
	}
	routes := []topology.Route{
		{Dst: pfx("10.60.0.0/24"), Gw: ip("10.97.0.2"), Dev: dev},
		{Dst: pfx("10.61.0.0/24"), Dev: dev, Table: 1107},
		{Dst: pfx("10.62.0.0/24"), Gw: ip("10.97.0.9"), Dev: dev, OnLink: true, Src: ip("10.97.0.1")},
		{Dst: pfx("fd61::/64"), Gw: ip("fd97::2"), Dev: dev, OnLink: true},
		{Dst: pfx("fd62::/64"), Dev: dev},
	}
	rules := []topology.Rule{
		{Src: pfx("10.60.0.0/24"), Table: 1107, Priority: 1100},
		{Dst: pfx("fd61::/64"), Table: 1107},
	}
	wantRoutes := []string{
		"10.60.0.0/24 via 10.97.0.2 dev " + dev + " table 254",
		"10.61.0.0/24 via <nil> dev " + dev + " table 1107",
		"10.62.0.0/24 via 10.97.0.9 dev " + dev + " table 254 onlink",
		"fd61::/64 via fd97::2 dev " + dev + " table 254 onlink",
		"fd62::/64 via <nil> dev " + dev + " table 254",
	}
	slices.Sort(wantRoutes)

	if err := set(routes, rules); err != nil {
		t.Fatalf("first Set: %v", err)
	}
	if got := kernelRoutes(t, ns, DefaultProtocol); !slices.Equal(got, wantRoutes) {
		t.Errorf("routes after Set:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(wantRoutes, "\n"))
	}
	if got := kernelRules(t, ns, DefaultProtocol); len(got) != 2 ||
		!strings.Contains(got[0]+got[1], "from 10.60.0.0/24 lookup 1107") || !strings.Contains(got[0]+got[1], "to fd61::/64 lookup 1107") {
		t.Errorf("rules after Set: %q", got)
	}

	if err := set(routes, rules); err != nil || changes.Load() != 0 {
		t.Errorf("second Set with the same input: err %v, %d kernel changes, want none", err, changes.Load())
	}

	// Fewer routes and rules: only the owned stale ones go.
	if err := set(routes[:1], rules[:1]); err != nil {
		t.Fatalf("Set with fewer: %v", err)
	}
	if got := kernelRoutes(t, ns, DefaultProtocol); !slices.Equal(got, wantRoutes[:1]) {
		t.Errorf("routes after Set with fewer: %q", got)
	}
	if got := kernelRules(t, ns, DefaultProtocol); len(got) != 1 {
		t.Errorf("rules after Set with fewer: %q", got)
	}
	if changes.Load() != 5 {
		t.Errorf("Set with fewer made %d changes, want 5 deletions", changes.Load())
	}

	// A changed gateway is replaced in place.
	moved := []topology.Route{{Dst: pfx("10.60.0.0/24"), Gw: ip("10.97.0.4"), Dev: dev}}
	if err := set(moved, rules[:1]); err != nil || changes.Load() != 1 {
		t.Errorf("Set with a new gateway: err %v, %d changes, want 1", err, changes.Load())
	}
	if got := kernelRoutes(t, ns, DefaultProtocol); len(got) != 1 || !strings.Contains(got[0], "via 10.97.0.4") {
		t.Errorf("routes after gateway change: %q", got)
	}

	// A foreign route in the way and a missing link are errors that name
	// the culprit; the rest is still applied.
	err := set(append(moved,
		topology.Route{Dst: pfx("10.50.0.0/24"), Dev: dev},
		topology.Route{Dst: pfx("10.63.0.0/24"), Dev: "kflnolink"},
		topology.Route{Dst: pfx("10.64.0.0/24"), Dev: dev},
	), nil)
	if !errors.Is(err, ErrForeignRoute) || !errors.Is(err, link.ErrLinkNotFound) || !strings.Contains(fmt.Sprint(err), `"kflnolink"`) {
		t.Errorf("Set with conflicts = %v; want ErrForeignRoute and ErrLinkNotFound naming kflnolink", err)
	}
	if got := kernelRoutes(t, ns, DefaultProtocol); len(got) != 2 {
		t.Errorf("routes after partial Set: %q, want 10.60 and 10.64", got)
	}
	if got := foreign(); got != foreignBefore {
		t.Errorf("foreign routes changed:\nbefore %s\nafter %s", foreignBefore, got)
	}

	linktest.Run(t, ns, func() error { return r.Close(context.Background()) })
	if got := kernelRoutes(t, ns, DefaultProtocol); len(got) != 0 {
		t.Errorf("routes after Close: %q", got)
	}
	if got := kernelRules(t, ns, DefaultProtocol); len(got) != 0 {
		t.Errorf("rules after Close: %q", got)
	}
	if got := foreign(); got != foreignBefore {
		t.Errorf("Close changed foreign routes:\nbefore %s\nafter %s", foreignBefore, got)
	}
}

func TestNewRouterRejectsReservedProtocol(t *testing.T) {
	for _, p := range []int{unix.RTPROT_KERNEL, unix.RTPROT_BOOT, unix.RTPROT_STATIC, 256} {
		if _, err := NewRouter(RouterOptions{Protocol: p}); err == nil {
			t.Errorf("NewRouter(Protocol %d) succeeded", p)
		}
	}
}

type testWriter struct{ t *testing.T }

func (w testWriter) Write(p []byte) (int, error) {
	w.t.Log(strings.TrimSpace(string(p)))
	return len(p), nil
}
