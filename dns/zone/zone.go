package zone

import (
	"net/netip"
	"strings"
	"sync"

	"github.com/miekg/dns"
)

// Origin is the zone's apex: the MCS API fixes it to clusterset.local.
const Origin = "clusterset.local."

// SchemaVersion is the version of the MCS DNS specification the zone follows,
// served as the TXT record of dns-version.clusterset.local.
const SchemaVersion = "1.0.0"

// DefaultTTL is the TTL, in seconds, of every service record and of negative
// answers (the SOA minimum) when Config.TTL is zero.
const DefaultTTL = 5

// VersionTTL is the TTL of the dns-version TXT record, which never changes.
const VersionTTL = 28800

// Config configures a Zone.
type Config struct {
	// TTL of service records and of negative answers; zero means DefaultTTL.
	TTL uint32
}

// Zone is the in-memory index of imports and slices and the records computed
// from them. Its methods are safe for concurrent use.
type Zone struct {
	ttl uint32

	mu      sync.RWMutex
	imports map[svcKey]Import
	slices  map[sliceKey]Slice
	// byService holds the names of each service's slices.
	byService map[svcKey]map[string]struct{}
	// served holds the records of every service that has any.
	served map[svcKey]names
	// reverse holds, per endpoint address, its per-endpoint name in each
	// service that has one.
	reverse map[netip.Addr]map[svcKey]string
	// namespaces counts the served services per namespace.
	namespaces map[string]int
	serial     uint32
}

type svcKey struct{ namespace, name string }

type sliceKey struct{ namespace, name string }

// New returns an empty zone.
func New(cfg Config) *Zone {
	if cfg.TTL == 0 {
		cfg.TTL = DefaultTTL
	}
	return &Zone{
		ttl:        cfg.TTL,
		imports:    map[svcKey]Import{},
		slices:     map[sliceKey]Slice{},
		byService:  map[svcKey]map[string]struct{}{},
		served:     map[svcKey]names{},
		reverse:    map[netip.Addr]map[svcKey]string{},
		namespaces: map[string]int{},
		serial:     1,
	}
}

// Contains reports whether name (any case, with or without the final dot) is
// clusterset.local or a name below it.
func Contains(name string) bool {
	return dns.IsSubDomain(Origin, dns.Fqdn(strings.ToLower(name)))
}

// SetImport adds or replaces an import.
func (z *Zone) SetImport(imp Import) {
	z.mu.Lock()
	defer z.mu.Unlock()
	k := svcKey{imp.Namespace, imp.Name}
	z.imports[k] = imp
	z.rebuild(k)
}

// DeleteImport removes the import namespace/name, if any.
func (z *Zone) DeleteImport(namespace, name string) {
	z.mu.Lock()
	defer z.mu.Unlock()
	k := svcKey{namespace, name}
	delete(z.imports, k)
	z.rebuild(k)
}

// SetSlice adds or replaces a slice; a slice whose Service changed moves to
// its new import.
func (z *Zone) SetSlice(s Slice) {
	z.mu.Lock()
	defer z.mu.Unlock()
	k := sliceKey{s.Namespace, s.Name}
	if old, ok := z.slices[k]; ok && old.Service != s.Service {
		z.removeSlice(k, old)
	}
	z.slices[k] = s
	sk := svcKey{s.Namespace, s.Service}
	if z.byService[sk] == nil {
		z.byService[sk] = map[string]struct{}{}
	}
	z.byService[sk][s.Name] = struct{}{}
	z.rebuild(sk)
}

// DeleteSlice removes the slice namespace/name, if any.
func (z *Zone) DeleteSlice(namespace, name string) {
	z.mu.Lock()
	defer z.mu.Unlock()
	k := sliceKey{namespace, name}
	if old, ok := z.slices[k]; ok {
		z.removeSlice(k, old)
	}
}

func (z *Zone) removeSlice(k sliceKey, old Slice) {
	delete(z.slices, k)
	sk := svcKey{old.Namespace, old.Service}
	delete(z.byService[sk], old.Name)
	if len(z.byService[sk]) == 0 {
		delete(z.byService, sk)
	}
	z.rebuild(sk)
}

// Services returns how many services the zone serves records for.
func (z *Zone) Services() int {
	z.mu.RLock()
	defer z.mu.RUnlock()
	return len(z.served)
}

// rebuild recomputes the records of one service; z.mu is held.
func (z *Zone) rebuild(k svcKey) {
	z.serial++
	old, was := z.served[k]
	for a := range ptrs(old) {
		if delete(z.reverse[a], k); len(z.reverse[a]) == 0 {
			delete(z.reverse, a)
		}
	}
	var n names
	if imp, ok := z.imports[k]; ok {
		var slices []Slice
		for name := range z.byService[k] {
			slices = append(slices, z.slices[sliceKey{k.namespace, name}])
		}
		n = build(imp, slices, z.ttl)
	}
	for a, name := range ptrs(n) {
		if z.reverse[a] == nil {
			z.reverse[a] = map[svcKey]string{}
		}
		z.reverse[a][k] = name
	}
	switch {
	case n != nil:
		z.served[k] = n
		if !was {
			z.namespaces[k.namespace]++
		}
	case was:
		delete(z.served, k)
		if z.namespaces[k.namespace]--; z.namespaces[k.namespace] == 0 {
			delete(z.namespaces, k.namespace)
		}
	}
}
