package wireguard

import (
	"golang.zx2c4.com/wireguard/wgctrl/wgtypes"
)

// key returns a deterministic key filled with b, for readable tests.
func key(b byte) wgtypes.Key {
	var k wgtypes.Key
	for i := range k {
		k[i] = b
	}
	return k
}
