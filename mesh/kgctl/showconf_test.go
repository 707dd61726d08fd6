package kgctl

import (
	"github.com/kilofed/kilofed/mesh/golden"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestGolden runs the commands of the seeds on the seed snapshot and
// compares their output with testdata/*.golden.
func TestGolden(t *testing.T) {
	dir := t.TempDir()
	keyFile := filepath.Join(dir, "dev-private.key")
	if err := os.WriteFile(keyFile, []byte(privateKey("seb-laptop").Base64()+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name       string
		args       []string
		wantCode   int
		wantStderr string // a substring of stderr; empty means stderr is empty
	}{
		{name: "graph", args: []string{"graph"}},
		{name: "graph-full", args: []string{"graph", "--mesh-granularity", "full", "--encapsulate", "never"},
			wantStderr: "warning: --mesh-granularity full differs from the agents' granularity: location on node-beijing, node-shanghai"},
		{name: "node-beijing", args: []string{"showconf", "node", "node-beijing"}},
		{name: "node-beijing-as-peer", args: []string{"showconf", "node", "node-beijing", "--as-peer"}},
		{name: "node-beijing-as-peer-allowed-ips", args: []string{"showconf", "node", "node-beijing", "--as-peer", "--allowed-ips", "10.42.0.0/16,10.43.0.0/16"}},
		{name: "node-beijing-yaml", args: []string{"showconf", "node", "node-beijing", "-o", "yaml"}},
		{name: "node-beijing-dr-yaml", args: []string{"showconf", "--peer-name", "cluster-prod", "node", "node-beijing", "-o", "yaml",
			"--allowed-ips", "10.42.0.0/16", "--allowed-ips", "10.43.0.0/16", "--persistent-keepalive", "25s"}},
		{name: "node-shanghai-json", args: []string{"showconf", "node", "node-shanghai", "-o", "json"}},
		{name: "peer-seb-laptop", args: []string{"showconf", "peer", "seb-laptop"},
			wantStderr: "kgctl: the PrivateKey line is a placeholder: pass --private-key-file FILE"},
		{name: "peer-seb-laptop-key", args: []string{"showconf", "peer", "seb-laptop", "--private-key-file", keyFile}},
		{name: "peer-admin-workstation-service-cidr", args: []string{"showconf", "peer", "admin-workstation", "--service-cidr", "10.96.0.0/12"},
			wantStderr: "placeholder"},
		{name: "peer-dr-yaml", args: []string{"showconf", "peer", "cluster-dr-ovhcloud", "-o", "yaml"}},
		{name: "peer-dr-json", args: []string{"showconf", "peer", "cluster-dr-ovhcloud", "-o", "json"}},
		{name: "error-key-mismatch", args: []string{"showconf", "peer", "admin-workstation", "--private-key-file", keyFile},
			wantCode: 1, wantStderr: "private key does not match the Peer's public key: the key's public half is " + publicKey("seb-laptop").String() +
				" but Peer admin-workstation has publicKey " + publicKey("admin-workstation").String()},
		{name: "error-unknown-node", args: []string{"showconf", "node", "master-eu-west"},
			wantCode: 1, wantStderr: "node master-eu-west: unknown node; check the name"},
		{name: "error-unknown-peer", args: []string{"showconf", "peer", "nobody"},
			wantCode: 1, wantStderr: "peer nobody: unknown peer"},
		{name: "error-allowed-ips-without-as-peer", args: []string{"showconf", "node", "node-beijing", "--allowed-ips", "10.42.0.0/16"},
			wantCode: 2, wantStderr: "add --as-peer, or use -o yaml|json"},
		{name: "error-key-file-for-node", args: []string{"showconf", "node", "node-beijing", "--private-key-file", keyFile},
			wantCode: 2, wantStderr: "a node's private key never leaves it"},
		{name: "error-bad-cidr", args: []string{"showconf", "node", "node-beijing", "--as-peer", "--allowed-ips", "10.42.0.0/33"},
			wantCode: 2, wantStderr: `--allowed-ips "10.42.0.0/33" is not a CIDR`},
		{name: "error-format", args: []string{"showconf", "peer", "seb-laptop", "-o", "ini"},
			wantCode: 2, wantStderr: `-o "ini": use wireguard, yaml or json`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			stdout, stderr, code := run(t, NewFakeSource(seedSnapshot()), tt.args...)
			if code != tt.wantCode {
				t.Errorf("exit status %d, want %d; stderr:\n%s", code, tt.wantCode, stderr)
			}
			if tt.wantStderr == "" && stderr != "" {
				t.Errorf("stderr: %q, want nothing", stderr)
			}
			if !strings.Contains(stderr, tt.wantStderr) {
				t.Errorf("stderr %q does not contain %q", stderr, tt.wantStderr)
			}
			if tt.wantCode != 0 {
				if stdout != "" {
					t.Errorf("stdout of a failed command: %q", stdout)
				}
				return
			}
			golden.Check(t, tt.name+".golden", stdout)
		})
	}
}
