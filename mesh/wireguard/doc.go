// Package wireguard configures a WireGuard interface to a desired Config:
// through wgctrl, against a kernel device when the module exists or an
// embedded wireguard-go device otherwise, reconfiguring only changed peers.
// It also renders a Config in wg-quick's INI format.
package wireguard
