package encap

import (
	"context"
	"fmt"
	"net/netip"
	"slices"
	"strings"
	"sync"
)

// Fake is an Encapsulator that records calls as text for golden tests:
// "set LINK REMOTE..." with the remotes sorted, and "close LINK".
type Fake struct {
	mu     sync.Mutex
	link   string
	record strings.Builder
}

var _ Encapsulator = (*Fake)(nil)

// NewFake returns a Fake whose Link is link.
func NewFake(link string) *Fake { return &Fake{link: link} }

// Set records the remotes.
func (f *Fake) Set(ctx context.Context, remotes []netip.Addr) error {
	rs := slices.Clone(remotes)
	slices.SortFunc(rs, netip.Addr.Compare)
	s := make([]string, 0, len(rs)+2)
	s = append(s, "set", f.link)
	for _, r := range slices.Compact(rs) {
		s = append(s, r.String())
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	fmt.Fprintln(&f.record, strings.Join(s, " "))
	return nil
}

// Link returns the link given to NewFake.
func (f *Fake) Link() string { return f.link }

// Inbound is IPIP when the link is IPIPLink, else VXLAN on DefaultPort.
func (f *Fake) Inbound() Inbound {
	if f.link == IPIPLink {
		return Inbound{Kind: KindIPIP}
	}
	return Inbound{Kind: KindVXLAN, Port: DefaultPort}
}

// Close records "close LINK".
func (f *Fake) Close(ctx context.Context) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	fmt.Fprintf(&f.record, "close %s\n", f.link)
	return nil
}

// Record returns the text recorded so far.
func (f *Fake) Record() string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.record.String()
}
