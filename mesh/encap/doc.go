// Package encap wraps traffic between nodes of one location in an IP
// tunnel when their network cannot route pod addresses natively: IPIP on
// link tunl0 where the kernel has it (as Kilo does), else VXLAN on link
// kilo-vxlan.
//
// The VXLAN link has learning off and a fixed VNI and port; Set keeps one
// all-zeros forwarding entry per remote node (head-end replication of
// broadcast such as ARP) and one entry for each remote's link address, which
// is derived from the remote's IP (see MAC), so unicast frames go to one
// node only. Routes stay with package route; Kind.NextHop says how to write
// them. IPv4: "podCIDR via REMOTE dev kilo-vxlan onlink", the kernel then
// resolves REMOTE by ARP through the tunnel and the remote node answers for
// its own address. IPv6 (over an IPv4 or IPv6 underlay): "podCIDR6 via
// Gateway6(REMOTE) dev kilo-vxlan", a link-local next hop that Set resolves
// with a permanent neighbour entry, because Linux answers neighbour
// solicitations only for addresses of the receiving link.
package encap
