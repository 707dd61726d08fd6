package wireguard

import (
	"testing"
	"time"

	"golang.zx2c4.com/wireguard/wgctrl/wgtypes"

	"github.com/kilofed/kilofed/mesh/topology/wgconf"
)

// key returns a deterministic key filled with b, for readable tests.
func key(b byte) wgconf.Key {
	var k wgconf.Key
	for i := range k {
		k[i] = b
	}
	return k
}

// secret returns key(b) as a private or preshared key.
func secret(b byte) wgconf.SecretKey { return wgconf.SecretKey(key(b)) }

// wgkey returns key(b) as wgctrl spells it, for live devices.
func wgkey(b byte) wgtypes.Key { return wgtypes.Key(key(b)) }

// eventually polls cond until it holds, failing after 10 s.
func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); !cond(); time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("after 10 s: %s", what)
		}
	}
}
