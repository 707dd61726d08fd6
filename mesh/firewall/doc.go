// Package firewall keeps the packet filter rules the mesh needs: forward
// accept for mesh ranges (when asked), NAT masquerade for traffic leaving
// the mesh, the WireGuard UDP port on input, and a filter that takes
// encapsulated packets (IPIP, VXLAN) only from the location's nodes.
// Rules is the whole desired state; Set renders it into kilofed's own
// iptables and ip6tables chains (KILOFED-*), each reached by one jump from
// a builtin chain, rewrites only what differs, and puts back rules, jumps
// or chains that someone deleted. It never edits other chains beyond its
// jumps.
package firewall
