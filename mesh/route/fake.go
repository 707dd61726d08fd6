package route

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"

	"github.com/kilofed/kilofed/mesh/topology"
)

// Fake is a Router that records every call as canonical text, for golden
// tests of code that drives a Router (Tailscale's habit): each Set writes
// "set" and the whole desired state (see Format) indented, Close writes
// "close".
type Fake struct {
	mu     sync.Mutex
	record strings.Builder
	routes []topology.Route
	rules  []topology.Rule
	// Err, when set, is returned by Set and Close after recording.
	Err error
}

var _ Router = (*Fake)(nil)

// Set validates and records the desired state.
func (f *Fake) Set(ctx context.Context, routes []topology.Route, rules []topology.Rule) error {
	if err := Validate(routes, rules); err != nil {
		return err
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	f.record.WriteString("set\n")
	for _, line := range strings.SplitAfter(Format(routes, rules), "\n") {
		if line != "" {
			fmt.Fprintf(&f.record, "  %s", line)
		}
	}
	f.routes, f.rules = slices.Clone(routes), slices.Clone(rules)
	return f.Err
}

// Close records "close" and forgets the state.
func (f *Fake) Close(ctx context.Context) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.record.WriteString("close\n")
	f.routes, f.rules = nil, nil
	return f.Err
}

// Record returns the text recorded so far.
func (f *Fake) Record() string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.record.String()
}

// State returns the routes and rules of the latest Set.
func (f *Fake) State() ([]topology.Route, []topology.Rule) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Clone(f.routes), slices.Clone(f.rules)
}
