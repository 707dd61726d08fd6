// Package mtu computes the MTUs of a node's mesh links from its underlay
// link's MTU: the WireGuard interface, the encapsulation link inside a
// location, and the largest packet a pod can send across the mesh.
package mtu
