package kubelet

import (
	"fmt"
	"net/netip"
	"sync"
)

// ipAllocator hands out pod addresses from one node's pod CIDR: the lowest
// free address, skipping the network address, the first host address (.1,
// kept for a gateway as on real nodes) and, for IPv4, the broadcast address.
// It is safe for concurrent use.
type ipAllocator struct {
	prefix netip.Prefix
	mu     sync.Mutex
	used   map[netip.Addr]string // address -> owner (pod namespace/name)
}

// newIPAllocator returns an allocator over prefix, which must leave at least
// one usable address (IPv4 /30 or larger, IPv6 /126 or larger).
func newIPAllocator(prefix netip.Prefix) (*ipAllocator, error) {
	prefix = prefix.Masked()
	if !prefix.IsValid() || prefix.Addr().BitLen()-prefix.Bits() < 2 {
		return nil, fmt.Errorf("pod CIDR %v is too small: give at least a /30 (IPv4) or /126 (IPv6)", prefix)
	}
	return &ipAllocator{prefix: prefix, used: map[netip.Addr]string{}}, nil
}

// usable reports whether a, inside the prefix, may be given to a pod.
func (a *ipAllocator) usable(addr netip.Addr) bool {
	first := a.prefix.Addr()
	if addr == first || addr == first.Next() {
		return false
	}
	if addr.Is4() && !a.prefix.Contains(addr.Next()) {
		return false // broadcast
	}
	return true
}

// Allocate returns the lowest free address for owner; an owner that already
// holds an address gets the same one back.
func (a *ipAllocator) Allocate(owner string) (netip.Addr, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	for addr, o := range a.used {
		if o == owner {
			return addr, nil
		}
	}
	// At most len(used)+3 addresses are skipped before a free one.
	for addr := a.prefix.Addr(); a.prefix.Contains(addr); addr = addr.Next() {
		if !a.usable(addr) {
			continue
		}
		if _, taken := a.used[addr]; taken {
			continue
		}
		a.used[addr] = owner
		return addr, nil
	}
	return netip.Addr{}, fmt.Errorf("%w: no free address left in %v for %s (%d in use): delete pods or give the node a larger pod CIDR",
		ErrPodCIDRExhausted, a.prefix, owner, len(a.used))
}

// Release frees addr; releasing a free or foreign address does nothing.
func (a *ipAllocator) Release(addr netip.Addr) {
	a.mu.Lock()
	defer a.mu.Unlock()
	delete(a.used, addr)
}

// InUse returns how many addresses are allocated.
func (a *ipAllocator) InUse() int {
	a.mu.Lock()
	defer a.mu.Unlock()
	return len(a.used)
}
