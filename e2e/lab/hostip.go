package lab

import "net/netip"

// HostIP is the host's address on the lab's management bridge: processes
// the lab starts on the host (Lab.Start) listen there to be reachable from
// every node's namespace (CoreDNS forwarding clusterset.local, say).
func (l *Lab) HostIP() netip.Addr { return mgmtHostIP(l.slot) }
