package firewall

import (
	"context"
	"fmt"
	"strings"
	"sync"
)

// Fake is a Firewall that records every call as text for golden tests of
// code that drives a Firewall: each Set writes "set" and the rendered
// chains of both families (see Format) indented, Close writes "close".
type Fake struct {
	mu     sync.Mutex
	record strings.Builder
	rules  Rules
}

var _ Firewall = (*Fake)(nil)

// Set renders and records rules.
func (f *Fake) Set(ctx context.Context, rules Rules) error {
	text, err := Format(rules)
	if err != nil {
		return err
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	f.record.WriteString("set\n")
	for _, line := range strings.SplitAfter(text, "\n") {
		if line != "" {
			fmt.Fprintf(&f.record, "  %s", line)
		}
	}
	f.rules = rules
	return nil
}

// Close records "close".
func (f *Fake) Close(ctx context.Context) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.record.WriteString("close\n")
	f.rules = Rules{}
	return nil
}

// Record returns the text recorded so far.
func (f *Fake) Record() string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.record.String()
}

// Rules returns the rules of the latest Set.
func (f *Fake) Rules() Rules {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.rules
}
