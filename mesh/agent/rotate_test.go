package agent

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/kilofed/kilofed/mesh/topology/wgconf"
)

// keyFileRig returns the leader of Beijing with its key loaded from a key
// file in dir, as kg starts it.
func keyFileRig(t *testing.T, dir string) (*rig, string) {
	t.Helper()
	path := filepath.Join(dir, "key")
	k, _, err := LoadOrCreateKey(path, nil)
	if err != nil {
		t.Fatal(err)
	}
	return newRig(t, "node-beijing", 1, func(c *Config) { c.PrivateKey, c.KeyFile = k, path }), path
}

// deviceKey returns the public key the device is configured with.
func deviceKey(t *testing.T, r *rig) wgconf.Key {
	t.Helper()
	st, err := r.device.Show(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	return st.PublicKey
}

// fileKey returns the public half of the key in path.
func fileKey(t *testing.T, path string) wgconf.Key {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	k, err := wgconf.ParseSecretKey(strings.TrimSpace(string(b)))
	if err != nil {
		t.Fatal(err)
	}
	return k.PublicKey()
}

func TestRotationRequestRotatesOnceAndPublishesTheNewKeyWithTheReport(t *testing.T) {
	ctx := context.Background()
	r, path := keyFileRig(t, t.TempDir())
	if err := r.agent.Reconcile(ctx); err != nil {
		t.Fatal(err)
	}
	old := r.backend.Published["node-beijing"].Key

	r.backend.SetRotateKeyRequest("node-beijing", "2026-12-01T10:00:00Z")
	if err := r.agent.Reconcile(ctx); err != nil {
		t.Fatal(err)
	}
	pub := r.backend.Published["node-beijing"]
	if pub.Key == old || pub.KeyRotated != "2026-12-01T10:00:00Z" {
		t.Fatalf("published key changed %v, key-rotated %q; want a new key and the request's value", pub.Key != old, pub.KeyRotated)
	}
	if got := deviceKey(t, r); got != pub.Key {
		t.Errorf("device key %s, published %s: want the device on the published key", got, pub.Key)
	}
	if got := fileKey(t, path); got != pub.Key {
		t.Errorf("key file holds %s, published %s: want the new key on disk", got, pub.Key)
	}
	if got := testutil.ToFloat64(r.agent.cfg.Metrics.keyRotations); got != 1 {
		t.Errorf("kilo_key_rotations_total = %v, want 1", got)
	}

	// The same request again, and any reconciliation after it, rotates nothing.
	r.backend.SetRotateKeyRequest("node-beijing", "2026-12-01T10:00:00Z")
	for range 2 {
		if err := r.agent.Reconcile(ctx); err != nil {
			t.Fatal(err)
		}
	}
	if again := r.backend.Published["node-beijing"]; again != pub {
		t.Errorf("after the same request: published %+v, want %+v unchanged", again, pub)
	}

	// A new request rotates again.
	r.backend.SetRotateKeyRequest("node-beijing", "2026-12-01T11:00:00Z")
	if err := r.agent.Reconcile(ctx); err != nil {
		t.Fatal(err)
	}
	if p := r.backend.Published["node-beijing"]; p.Key == pub.Key || p.KeyRotated != "2026-12-01T11:00:00Z" {
		t.Errorf("second request: key changed %v, key-rotated %q", p.Key != pub.Key, p.KeyRotated)
	}
}

func TestRestartAfterARotationDoesNotRotateAgain(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	r, _ := keyFileRig(t, dir)
	r.backend.SetRotateKeyRequest("node-beijing", "req-1")
	if err := r.agent.Reconcile(ctx); err != nil {
		t.Fatal(err)
	}
	rotated := r.backend.Published["node-beijing"]

	// The restarted agent loads the rotated key; the request is still on the Node.
	r2, _ := keyFileRig(t, dir)
	r2.backend.SetRotateKeyRequest("node-beijing", "req-1")
	if err := r2.agent.Reconcile(ctx); err != nil {
		t.Fatal(err)
	}
	if got := r2.backend.Published["node-beijing"]; got.Key != rotated.Key || got.KeyRotated != "req-1" {
		t.Errorf("after restart published key same %v, key-rotated %q; want the rotated key kept and the request still reported", got.Key == rotated.Key, got.KeyRotated)
	}
	if got := testutil.ToFloat64(r2.agent.cfg.Metrics.keyRotations); got != 0 {
		t.Errorf("kilo_key_rotations_total after restart = %v, want 0", got)
	}
}

func TestFailedKeyWriteKeepsTheOldKeyOnTheDevice(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	// The key file's path is a folder that is not empty: the new key
	// cannot be renamed over it, whoever runs the test.
	path := filepath.Join(dir, "key")
	if err := os.MkdirAll(filepath.Join(path, "in-the-way"), 0o700); err != nil {
		t.Fatal(err)
	}
	r := newRig(t, "node-beijing", 1, func(c *Config) { c.KeyFile = path })
	if err := r.agent.Reconcile(ctx); err != nil {
		t.Fatal(err)
	}
	r.backend.SetRotateKeyRequest("node-beijing", "req-1")
	err := r.agent.Reconcile(ctx)
	if err == nil || !strings.Contains(err.Error(), "rotate key") {
		t.Fatalf("Reconcile = %v, want the rotation's failure", err)
	}
	if got := deviceKey(t, r); got != pubKey(t, 1) {
		t.Errorf("device key %s, want the old key %s", got, pubKey(t, 1))
	}
	if p := r.backend.Published["node-beijing"]; p.Key != pubKey(t, 1) || p.KeyRotated != "" {
		t.Errorf("published key old %v, key-rotated %q; want the old key and no report", p.Key == pubKey(t, 1), p.KeyRotated)
	}
	if got := testutil.ToFloat64(r.agent.cfg.Metrics.stepErrors.WithLabelValues(stepKey)); got != 1 {
		t.Errorf("kilo_reconcile_step_errors{step=key} = %v, want 1", got)
	}
	if entries, _ := os.ReadDir(dir); len(entries) != 1 {
		t.Errorf("folder holds %d entries, want only the key path: no temporary file left", len(entries))
	}
}

func TestRotationRequestWithoutAKeyFileIsRefused(t *testing.T) {
	r := newRig(t, "node-beijing", 1)
	r.backend.SetRotateKeyRequest("node-beijing", "req-1")
	if err := r.agent.Reconcile(context.Background()); err == nil || !strings.Contains(err.Error(), "key file") {
		t.Errorf("Reconcile = %v, want a refusal naming the key file", err)
	}
	if got := deviceKey(t, r); got != pubKey(t, 1) {
		t.Errorf("device key changed without a key file")
	}
}
