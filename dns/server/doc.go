// Package server is kilofed's DNS server: it answers clusterset.local from a
// zone.Zone, authoritatively and without ever forwarding those names, and
// forwards every other name to configured upstream resolvers, over UDP and
// TCP, with EDNS0 buffer sizes and truncation handled, so that it can be a
// machine's only resolver.
package server
