package agent

import (
	"bytes"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/kilofed/kilofed/mesh/topology/wgconf"
)

func TestLoadOrCreateKeyFixesAReadableKeyAndSaysSo(t *testing.T) {
	path := filepath.Join(t.TempDir(), "key")
	want, err := wgconf.GeneratePrivateKey()
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(want.Base64()+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(path, 0o644); err != nil { // whatever the umask
		t.Fatal(err)
	}
	var logs bytes.Buffer
	got, created, err := LoadOrCreateKey(path, slog.New(slog.NewTextHandler(&logs, nil)))
	if err != nil || created || got != want {
		t.Fatalf("LoadOrCreateKey = same key %v, created %v, %v; want the file's key", got == want, created, err)
	}
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	if fi.Mode().Perm() != 0o600 {
		t.Errorf("mode after load = %04o, want 0600", fi.Mode().Perm())
	}
	if l := logs.String(); !strings.Contains(l, "level=WARN") || !strings.Contains(l, "mode=0644") || !strings.Contains(l, "rotate") {
		t.Errorf("log = %q, want a warning with the old mode and advice to rotate", l)
	}
	logs.Reset()
	if _, _, err := LoadOrCreateKey(path, slog.New(slog.NewTextHandler(&logs, nil))); err != nil || logs.Len() != 0 {
		t.Errorf("second load: %v, log %q; want no error and no warning", err, logs.String())
	}
}

func TestLoadOrCreateKeyWritesThroughAUniqueTempFile(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "key")
	// A leftover of a fixed temporary name must not get in the way.
	if err := os.Mkdir(path+".tmp", 0o700); err != nil {
		t.Fatal(err)
	}
	key, created, err := LoadOrCreateKey(path, nil)
	if err != nil || !created {
		t.Fatalf("LoadOrCreateKey = created %v, %v", created, err)
	}
	b, err := os.ReadFile(path)
	if err != nil || strings.TrimSpace(string(b)) != key.Base64() {
		t.Errorf("key file holds %q, %v; want the key", b, err)
	}
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range entries {
		names = append(names, e.Name())
	}
	if len(names) != 2 { // key and the leftover
		t.Errorf("folder holds %v, want only the key and the leftover: no temporary file left", names)
	}
}

func TestAgentConfigNeverPrintsThePrivateKey(t *testing.T) {
	cfg := Config{Hostname: "node-beijing", PrivateKey: key(t, 1), ListenPort: 51820}
	secret := cfg.PrivateKey.Base64()
	var logs bytes.Buffer
	slog.New(slog.NewJSONHandler(&logs, nil)).Info("config", "cfg", cfg)
	for _, out := range []string{fmt.Sprintf("%v", cfg), fmt.Sprintf("%+v", cfg), fmt.Sprintf("%#v", cfg), logs.String()} {
		if strings.Contains(out, secret) {
			t.Errorf("the private key appears in %q", out)
		}
	}
}

// TestDeletingTheKeyFileRotatesAtRestart is the seed's manual rotation:
// delete the key file, restart the agent.
func TestDeletingTheKeyFileRotatesAtRestart(t *testing.T) {
	path := filepath.Join(t.TempDir(), "key")
	first, created, err := LoadOrCreateKey(path, nil)
	if err != nil || !created {
		t.Fatalf("first start: created %v, %v", created, err)
	}
	same, created, err := LoadOrCreateKey(path, nil)
	if err != nil || created || same != first {
		t.Fatalf("restart: same key %v, created %v, %v; want the same key", same == first, created, err)
	}
	if err := os.Remove(path); err != nil {
		t.Fatal(err)
	}
	rotated, created, err := LoadOrCreateKey(path, nil)
	if err != nil || !created || rotated == first {
		t.Errorf("restart without the file: new key %v, created %v, %v; want a new key", rotated != first, created, err)
	}
}
