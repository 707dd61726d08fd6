// Package wgconf holds WireGuard configuration as plain values: keys, the
// desired state of an interface and its peers, and their wg-quick INI form.
// The topology computes these values, the wireguard package applies them to
// a device, and the CLI prints them; wgconf itself does no I/O and imports
// no WireGuard implementation.
//
// Secret keys (an interface's private key, a preshared key) are SecretKey
// values, which print as "(redacted)" with every fmt verb and in slog
// output; only Base64 and Render with WithPrivateKey write them out.
package wgconf
