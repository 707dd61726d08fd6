// Package wireguard configures a WireGuard interface to a desired
// wgconf.Config: through wgctrl, against a kernel device when the module
// exists or an embedded wireguard-go device otherwise, reconfiguring only
// changed peers.
package wireguard
