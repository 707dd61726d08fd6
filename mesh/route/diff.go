package route

import (
	"errors"
	"fmt"
	"net/netip"
	"slices"

	"github.com/kilofed/kilofed/mesh/topology"
)

var (
	// ErrInvalid is returned for routes or rules that cannot be applied.
	ErrInvalid = errors.New("invalid route or rule")
	// ErrForeignRoute is returned when a route that the Router does not
	// own occupies a desired destination; the Router leaves it alone.
	ErrForeignRoute = errors.New("route owned by someone else")
)

// RoutePlan is what turns the current owned routes into the desired ones.
type RoutePlan struct {
	// Add are desired routes whose destination has no route yet.
	Add []topology.Route
	// Replace are desired routes whose destination has a different route.
	Replace []topology.Route
	// Delete are current routes that are not desired.
	Delete []topology.Route
}

// RulePlan is what turns the current owned rules into the desired ones.
type RulePlan struct {
	// Add are desired rules that are missing.
	Add []topology.Rule
	// Delete are current rules that are not desired.
	Delete []topology.Rule
}

// Empty reports whether the plan changes nothing.
func (p RoutePlan) Empty() bool { return len(p.Add)+len(p.Replace)+len(p.Delete) == 0 }

// Empty reports whether the plan changes nothing.
func (p RulePlan) Empty() bool { return len(p.Add)+len(p.Delete) == 0 }

// routeKey identifies a route in the kernel: its table and destination.
type routeKey struct {
	table int
	dst   netip.Prefix
}

// DiffRoutes compares desired routes with the current owned ones. Routes
// are identified by table and destination; a route whose gateway, link,
// source or onlink flag differ is replaced in place. Both inputs are
// normalized first (masked destinations, table 0 for main); the result is
// sorted.
func DiffRoutes(desired, current []topology.Route) RoutePlan {
	want := make(map[routeKey]topology.Route, len(desired))
	for _, r := range desired {
		r = normRoute(r)
		want[routeKey{r.Table, r.Dst}] = r
	}
	have := make(map[routeKey]topology.Route, len(current))
	var p RoutePlan
	for _, r := range current {
		r = normRoute(r)
		k := routeKey{r.Table, r.Dst}
		if _, dup := have[k]; dup {
			// Two owned routes for one destination (another metric):
			// keep one, delete the rest.
			p.Delete = append(p.Delete, r)
			continue
		}
		have[k] = r
		if _, ok := want[k]; !ok {
			p.Delete = append(p.Delete, r)
		}
	}
	for k, r := range want {
		switch c, ok := have[k]; {
		case !ok:
			p.Add = append(p.Add, r)
		case c != r:
			p.Replace = append(p.Replace, r)
		}
	}
	slices.SortFunc(p.Add, compareRoutes)
	slices.SortFunc(p.Replace, compareRoutes)
	slices.SortFunc(p.Delete, compareRoutes)
	return p
}

// DiffRules compares desired rules with the current owned ones. A desired
// rule with priority zero matches a current rule of any priority (the
// kernel picks one); the result is sorted.
func DiffRules(desired, current []topology.Rule) RulePlan {
	cur := make([]topology.Rule, len(current))
	for i, r := range current {
		cur[i] = normRule(r)
	}
	used := make([]bool, len(cur))
	var p RulePlan
	seen := map[topology.Rule]bool{}
	for _, d := range desired {
		d = normRule(d)
		if seen[d] {
			continue
		}
		seen[d] = true
		found := false
		for i, c := range cur {
			if used[i] || c.Src != d.Src || c.Dst != d.Dst || c.Table != d.Table {
				continue
			}
			if d.Priority != 0 && c.Priority != d.Priority {
				continue
			}
			used[i], found = true, true
			break
		}
		if !found {
			p.Add = append(p.Add, d)
		}
	}
	for i, c := range cur {
		if !used[i] {
			p.Delete = append(p.Delete, c)
		}
	}
	slices.SortFunc(p.Add, compareRules)
	slices.SortFunc(p.Delete, compareRules)
	return p
}

// Validate reports routes and rules that cannot be applied: invalid or
// mixed-family addresses, a route without link, a rule without Src or Dst,
// and two different routes for one table and destination.
func Validate(routes []topology.Route, rules []topology.Rule) error {
	var errs []error
	seen := make(map[routeKey]topology.Route, len(routes))
	for _, r := range routes {
		switch {
		case !r.Dst.IsValid():
			errs = append(errs, fmt.Errorf("%w: route %s has no destination", ErrInvalid, r))
			continue
		case r.Dev == "":
			errs = append(errs, fmt.Errorf("%w: route %s has no link (Dev)", ErrInvalid, r))
		case r.Src.IsValid() && r.Src.Unmap().Is4() != r.Dst.Addr().Is4():
			errs = append(errs, fmt.Errorf("%w: route %s mixes address families", ErrInvalid, r))
		case r.Gw.IsValid() && r.Gw.Unmap().Is4() != r.Dst.Addr().Is4():
			// The kernel takes a next hop of the other family only
			// through nexthop objects, which the Router does not manage.
			errs = append(errs, fmt.Errorf("%w: route %s: gateway and destination must be of the same address family", ErrInvalid, r))
		}
		n := normRoute(r)
		k := routeKey{n.Table, n.Dst}
		if o, ok := seen[k]; ok && o != n {
			errs = append(errs, fmt.Errorf("%w: routes %q and %q have the same destination and table", ErrInvalid, o, n))
		}
		seen[k] = n
	}
	for _, r := range rules {
		switch {
		case !r.Src.IsValid() && !r.Dst.IsValid():
			errs = append(errs, fmt.Errorf("%w: rule %q needs a Src or Dst to know its address family", ErrInvalid, r))
		case r.Src.IsValid() && r.Dst.IsValid() && r.Src.Addr().Is4() != r.Dst.Addr().Is4():
			errs = append(errs, fmt.Errorf("%w: rule %q mixes address families", ErrInvalid, r))
		case r.Priority < 0:
			errs = append(errs, fmt.Errorf("%w: rule %q has a negative priority", ErrInvalid, r))
		}
	}
	return errors.Join(errs...)
}

func normTable(t int) int {
	if t == topology.MainTable {
		return 0
	}
	return t
}

func normRoute(r topology.Route) topology.Route {
	r.Dst = r.Dst.Masked()
	r.Table = normTable(r.Table)
	r.Gw = r.Gw.Unmap()
	r.Src = r.Src.Unmap()
	return r
}

func normRule(r topology.Rule) topology.Rule {
	r.Src = r.Src.Masked()
	r.Dst = r.Dst.Masked()
	r.Table = normTable(r.Table)
	return r
}
