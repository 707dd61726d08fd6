// Package firewall keeps the packet filter rules the mesh needs: forward
// accept for mesh ranges, NAT masquerade for traffic leaving the mesh, and
// the WireGuard UDP port on input. Rules is the whole desired state; Set
// renders it into kilofed's own iptables and ip6tables chains (KILOFED-*),
// each reached by one jump from a builtin chain, rewrites only what
// differs, and puts back rules, jumps or chains that someone deleted. It
// never edits other chains beyond its jumps.
package firewall
