// Package link manages the parts of a network link that are neither
// WireGuard nor routing: its addresses (declaratively: add missing, remove
// others), its administrative state, its MTU, and running code inside a
// network namespace.
//
// Device (package wireguard) configures peers and keys only; the agent gives
// the WireGuard link its addresses and brings it up through this package, the
// same way for a kernel and an embedded wireguard-go device.
package link
