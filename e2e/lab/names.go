package lab

import (
	"fmt"
	"net/netip"
)

// Prefix starts the name of everything the lab creates on the machine:
// network namespaces, links in the host namespace, temp dirs. Sweep removes
// what carries it.
const Prefix = "kfl-"

// Names of links inside the lab's own namespaces (link names are at most 15
// characters; the ones in the host namespace carry the run id).
const (
	// NodeLANLink is a node's link to its location's LAN.
	NodeLANLink = "eth0"
	// NodeMgmtLink is a node's link to the management bridge, over which it
	// reaches its cluster's API server.
	NodeMgmtLink = "mgmt0"
	// RouterLANBridge is the LAN bridge inside a router namespace.
	RouterLANBridge = "lan0"
	// RouterWANLink is a router's link to the WAN namespace.
	RouterWANLink = "wan0"
)

// APIServerPort is the port of every cluster's API server, on its own
// management address.
const APIServerPort = 6443

// wanNetns is the WAN namespace of a run.
func wanNetns(run string) string { return Prefix + run + "-wan" }

// routerNetns is the namespace of a location's router.
func routerNetns(run, cluster, location string) string {
	return Prefix + run + "-" + cluster + "-" + location + "-r"
}

// nodeNetns is the namespace of a node.
func nodeNetns(run, cluster, node string) string { return Prefix + run + "-" + cluster + "-" + node }

// mgmtBridge is the run's management bridge in the host namespace.
func mgmtBridge(run string) string { return Prefix + run + "-m" }

// mgmtHostLink is the host end of node g's management veth (g is the node's
// index in the whole lab). At most 15 characters for run ids of 6.
func mgmtHostLink(run string, g int) string { return fmt.Sprintf("%s%s-%d", Prefix, run, g) }

// routerPortLink is the router end of node g's LAN veth.
func routerPortLink(g int) string { return fmt.Sprintf("kfl-n%d", g) }

// wanPortLink is the WAN end of location g's router veth (g is the
// location's index in the whole lab).
func wanPortLink(g int) string { return fmt.Sprintf("kfl-l%d", g) }

// mgmtPrefix is the management network of the lab in slot s: 100.(64+s).0.0/16.
func mgmtPrefix(slot int) netip.Prefix {
	return netip.PrefixFrom(netip.AddrFrom4([4]byte{100, byte(64 + slot), 0, 0}), 16)
}

// mgmtHostIP is the host's address on the management bridge.
func mgmtHostIP(slot int) netip.Addr { return netip.AddrFrom4([4]byte{100, byte(64 + slot), 0, 1}) }

// apiServerIP is cluster c's (1-based) API server address.
func apiServerIP(slot, c int) netip.Addr {
	return netip.AddrFrom4([4]byte{100, byte(64 + slot), byte(c), 1})
}

// nodeMgmtIP is the management address of node n (0-based in its cluster)
// of cluster c (1-based).
func nodeMgmtIP(slot, c, n int) netip.Addr {
	return netip.AddrFrom4([4]byte{100, byte(64 + slot), byte(c), byte(10 + n)})
}

// maxSlots is how many labs can run side by side (one /16 of MgmtRange each).
const maxSlots = 64
