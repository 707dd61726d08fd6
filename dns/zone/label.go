package zone

import "strings"

// AddressLabel is the DNS label of a headless endpoint that has no
// hostname: its address with dots or colons turned into dashes
// (10.11.0.4 -> 10-11-0-4, fd00::4 -> fd00--4), as CoreDNS names such an
// endpoint in cluster.local. servicesync publishes the same label as the
// endpoint's hostname, so the two cannot drift apart.
func AddressLabel(addr string) string {
	return strings.NewReplacer(".", "-", ":", "-").Replace(addr)
}
