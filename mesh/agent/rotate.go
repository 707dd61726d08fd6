package agent

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"strings"

	"github.com/kilofed/kilofed/mesh/topology/wgconf"
)

// A key rotation is asked for by the operator, who writes a unique value in
// the Node's kilo.squat.ai/rotate-key annotation (kilofed rotate-keys). The
// agent honours each value once: it generates a key, writes it over the
// key file, records the value in the file beside it (rotatedSuffix), then
// publishes the new public key together with kilo.squat.ai/key-rotated set
// to the value, and configures the device with the new key. The others
// follow the published key like any other change of the topology.
//
// Order matters for crashes: the key file is written first, so a crash
// before the record is written at worst rotates once more at the restart;
// the reverse order could report a rotation that did not happen.

// rotatedSuffix names, after the key file's name, the file that records the
// last rotation request honoured.
const rotatedSuffix = ".rotated"

// errNoKeyFile is returned when a rotation is asked for but the agent was
// given no key file to write the new key to.
var errNoKeyFile = errors.New("no key file configured (kg --key-file): the new key could not be kept across restarts, so the request is not honoured")

// rotatedPath returns the file recording the last honoured request.
func rotatedPath(keyFile string) string { return keyFile + rotatedSuffix }

// readRotated returns the last request honoured for the key in keyFile, ""
// when none was.
func readRotated(keyFile string) (string, error) {
	if keyFile == "" {
		return "", nil
	}
	b, err := os.ReadFile(rotatedPath(keyFile))
	if errors.Is(err, fs.ErrNotExist) {
		return "", nil
	}
	if err != nil {
		return "", fmt.Errorf("read the last key rotation: %w", err)
	}
	return strings.TrimSpace(string(b)), nil
}

// rotateKey honours a new rotation request on this node, if there is one:
// it switches the agent's key only once the new key is on disk, so that a
// failed write leaves the node with its old key, in the file and on the
// device. It reports whether the key changed.
func (a *Agent) rotateKey() (bool, error) {
	req := a.cfg.Backend.RotateKeyRequest(a.cfg.Hostname)
	a.mu.Lock()
	honoured := a.rotated
	a.mu.Unlock()
	if req == "" || req == honoured {
		return false, nil
	}
	if a.cfg.KeyFile == "" {
		return false, errNoKeyFile
	}
	key, err := wgconf.GeneratePrivateKey()
	if err != nil {
		return false, err
	}
	if err := writeKeyFile(a.cfg.KeyFile, key); err != nil {
		return false, fmt.Errorf("write the new private key to %s: %w", a.cfg.KeyFile, err)
	}
	a.mu.Lock()
	old := a.key.PublicKey()
	a.key, a.rotated = key, req
	a.mu.Unlock()
	a.log.Info("WireGuard key rotated", "request", req, "old", old.String(), "new", key.PublicKey().String())
	if a.cfg.Metrics != nil {
		a.cfg.Metrics.keyRotations.Inc()
	}
	if err := writeFileDurably(rotatedPath(a.cfg.KeyFile), req+"\n"); err != nil {
		// The new key is in the key file, so it is the one to use; a
		// restart will only rotate once more.
		a.log.Warn("the key rotation was not recorded: a restart will rotate again", "file", rotatedPath(a.cfg.KeyFile), "err", err)
	}
	return true, nil
}

// privateKey returns the node's current private key and the last rotation
// request it honoured.
func (a *Agent) privateKey() (wgconf.SecretKey, string) {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.key, a.rotated
}
