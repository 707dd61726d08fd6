package agent

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"golang.zx2c4.com/wireguard/wgctrl/wgtypes"
)

// LoadOrCreateKey reads the node's WireGuard private key from path, or
// generates one and writes it there with mode 0600 when the file does not
// exist. The private key never leaves the node: only its public half is
// published. Deleting the file and restarting the agent rotates the key.
func LoadOrCreateKey(path string) (key wgtypes.Key, created bool, err error) {
	b, err := os.ReadFile(path)
	switch {
	case err == nil:
		key, err = wgtypes.ParseKey(strings.TrimSpace(string(b)))
		if err != nil {
			return key, false, fmt.Errorf("private key in %s is not a WireGuard key (%w); delete the file to generate a new one", path, err)
		}
		return key, false, nil
	case !errors.Is(err, fs.ErrNotExist):
		return key, false, fmt.Errorf("read private key: %w", err)
	}
	key, err = wgtypes.GeneratePrivateKey()
	if err != nil {
		return key, false, fmt.Errorf("generate private key: %w", err)
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return key, false, fmt.Errorf("create key folder: %w", err)
	}
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, []byte(key.String()+"\n"), 0o600); err != nil {
		return key, false, fmt.Errorf("write private key: %w", err)
	}
	if err := os.Rename(tmp, path); err != nil {
		return key, false, fmt.Errorf("write private key: %w", err)
	}
	return key, true, nil
}
