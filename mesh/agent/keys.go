package agent

import (
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"strings"

	"github.com/kilofed/kilofed/mesh/topology/wgconf"
)

// keyMode is the mode of a private key file: readable by its owner only.
const keyMode fs.FileMode = 0o600

// LoadOrCreateKey reads the node's WireGuard private key from path, or
// generates one when the file does not exist and writes it there durably:
// mode 0600, a unique temporary file in the same folder synced to disk,
// renamed over path, then the folder synced, so that a crash leaves either
// no key or the whole key. The private key never leaves the node: only its
// public half is published. Deleting the file and restarting the agent
// rotates the key; so does a rotation request on the Node (rotate.go).
//
// A key file that group or others can read is fixed, not refused: its mode
// is set to 0600 and a warning advises rotating the key, since it may have
// been read. Refusing would take the node out of the mesh at its next
// restart. When the mode cannot be changed (a read-only volume) the key is
// refused, with an error that says so. log may be nil.
func LoadOrCreateKey(path string, log *slog.Logger) (key wgconf.SecretKey, created bool, err error) {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	b, err := os.ReadFile(path)
	switch {
	case err == nil:
		if err := checkKeyMode(path, log); err != nil {
			return key, false, err
		}
		key, err = wgconf.ParseSecretKey(strings.TrimSpace(string(b)))
		if err != nil {
			return key, false, fmt.Errorf("private key in %s is not a WireGuard key (%w); delete the file to generate a new one", path, err)
		}
		return key, false, nil
	case !errors.Is(err, fs.ErrNotExist):
		return key, false, fmt.Errorf("read private key: %w", err)
	}
	if key, err = wgconf.GeneratePrivateKey(); err != nil {
		return key, false, err
	}
	if err := writeKeyFile(path, key); err != nil {
		return wgconf.SecretKey{}, false, fmt.Errorf("write private key: %w", err)
	}
	return key, true, nil
}

// checkKeyMode sets the mode of the key file at path to keyMode when group
// or others may read or write it.
func checkKeyMode(path string, log *slog.Logger) error {
	fi, err := os.Stat(path)
	if err != nil {
		return fmt.Errorf("read private key: %w", err)
	}
	mode := fi.Mode().Perm()
	if mode&0o077 == 0 {
		return nil
	}
	if err := os.Chmod(path, keyMode); err != nil {
		return fmt.Errorf("private key file %s has mode %04o, readable by others, and its mode cannot be fixed (%w): make it 0600 (a Secret volume: defaultMode: 0600), or delete it to generate a new key", path, mode, err)
	}
	log.Warn("private key file was readable by others: mode set to 0600; the key may have been read, rotate it by deleting the file and restarting",
		"file", path, "mode", fmt.Sprintf("%04o", mode))
	return nil
}

// writeKeyFile writes key to path durably (writeFileDurably).
func writeKeyFile(path string, key wgconf.SecretKey) error {
	return writeFileDurably(path, key.Base64()+"\n")
}

// writeFileDurably writes data to path, mode 0600, through a synced
// temporary file in the same folder, then syncs the folder so that the
// rename is durable: a crash leaves either the old file or the new one.
func writeFileDurably(path, data string) (err error) {
	dir := filepath.Dir(path)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return fmt.Errorf("create key folder: %w", err)
	}
	f, err := os.CreateTemp(dir, "."+filepath.Base(path)+".*.tmp") // mode 0600
	if err != nil {
		return err
	}
	defer func() {
		if err != nil {
			_ = os.Remove(f.Name())
		}
	}()
	if err := f.Chmod(keyMode); err != nil {
		_ = f.Close()
		return err
	}
	if _, err := f.WriteString(data); err != nil {
		_ = f.Close()
		return err
	}
	if err := f.Sync(); err != nil {
		_ = f.Close()
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	if err := os.Rename(f.Name(), path); err != nil {
		return err
	}
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	return d.Sync()
}
