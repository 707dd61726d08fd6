package main

import (
	"bytes"
	"encoding/json"
	"log/slog"
	"net/netip"
	"os"
	"path/filepath"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// bridgeConf is a CNI configuration list like the one Kilo's install-cni
// container writes: a bridge whose host-local IPAM has no range yet.
const bridgeConf = `{
  "cniVersion": "0.4.0",
  "name": "kilo",
  "plugins": [
    {"type": "bridge", "bridge": "kube-bridge", "isDefaultGateway": true, "ipam": {"type": "host-local"}},
    {"type": "portmap", "capabilities": {"portMappings": true}}
  ]
}`

func TestCNIConfigurationGetsThePodCIDRs(t *testing.T) {
	cidrs := []netip.Prefix{netip.MustParsePrefix("10.42.1.0/24"), netip.MustParsePrefix("fd42:1::/64")}
	out, changed, err := setCNIPodCIDRs([]byte(bridgeConf), cidrs)
	if err != nil || !changed {
		t.Fatalf("changed %v, err %v; want a change", changed, err)
	}
	var got map[string]any
	if err := json.Unmarshal(out, &got); err != nil {
		t.Fatal(err)
	}
	plugins := got["plugins"].([]any)
	want := map[string]any{
		"type": "host-local",
		"ranges": []any{
			[]any{map[string]any{"subnet": "10.42.1.0/24"}},
			[]any{map[string]any{"subnet": "fd42:1::/64"}},
		},
	}
	if diff := cmp.Diff(want, plugins[0].(map[string]any)["ipam"]); diff != "" {
		t.Errorf("bridge ipam (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(map[string]any{"type": "portmap", "capabilities": map[string]any{"portMappings": true}}, plugins[1]); diff != "" {
		t.Errorf("portmap changed (-want +got):\n%s", diff)
	}
	if got["name"] != "kilo" || got["cniVersion"] != "0.4.0" {
		t.Errorf("top-level fields lost: %v", got)
	}

	again, changed, err := setCNIPodCIDRs(out, cidrs)
	if err != nil || changed || !bytes.Equal(again, out) {
		t.Errorf("second pass: changed %v, err %v; want the same bytes back", changed, err)
	}
	if _, _, err := setCNIPodCIDRs([]byte(`{"plugins":[{"type":"portmap"}]}`), cidrs); err != errNoIPAM {
		t.Errorf("no ipam: %v, want errNoIPAM", err)
	}
}

func TestCNIConfigurationFileIsWrittenOnlyWhenItExists(t *testing.T) {
	log := slog.New(slog.DiscardHandler)
	dir := t.TempDir()
	cidrs := []netip.Prefix{netip.MustParsePrefix("10.42.1.0/24")}
	missing := filepath.Join(dir, "10-kilo.conflist")
	if err := updateCNIConfig(missing, cidrs, log); err != nil {
		t.Fatalf("missing file: %v, want nil (another CNI is in charge)", err)
	}
	if _, err := os.Stat(missing); !os.IsNotExist(err) {
		t.Fatalf("updateCNIConfig created %s", missing)
	}

	path := filepath.Join(dir, "10-kilo.conflist")
	if err := os.WriteFile(path, []byte(bridgeConf), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := updateCNIConfig(path, cidrs, log); err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Contains(data, []byte(`"subnet": "10.42.1.0/24"`)) {
		t.Errorf("CNI configuration lacks the pod CIDR:\n%s", data)
	}
	if fi, _ := os.Stat(path); fi.Mode().Perm() != 0o644 {
		t.Errorf("mode %v, want 0644", fi.Mode().Perm())
	}
	if entries, _ := os.ReadDir(dir); len(entries) != 1 {
		t.Errorf("directory holds %d files, want only the configuration (no temp file left)", len(entries))
	}
	if err := updateCNIConfig(path, nil, log); err == nil {
		t.Error("no pod CIDR: want an error saying so")
	}
}
