package kgctl

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/kilofed/kilofed/mesh/apis/kilo/v1alpha1"
	"github.com/kilofed/kilofed/mesh/k8s"
	"github.com/kilofed/kilofed/mesh/topology/wgconf"
)

func TestDispatch(t *testing.T) {
	var sawKubeconfig, sawContext string
	probe := Command{Name: "probe", Usage: "probe", Summary: "records the global flags",
		Run: func(_ context.Context, env *Env, args []string) error {
			fs := newFlagSet(env, Command{Name: "probe", Usage: "probe"}, "probe")
			if err := parseFlags(fs, args); err != nil {
				return err
			}
			sawKubeconfig, sawContext = env.Kubeconfig, env.Context
			return nil
		}}
	cmds := append(MeshCommands(), probe)
	tests := []struct {
		name                   string
		args                   []string
		wantCode               int
		wantStdout, wantStderr string
		wantKubeconfig         string
	}{
		{name: "no command", args: nil, wantCode: 2, wantStderr: "usage: kilofed [--kubeconfig FILE]"},
		{name: "help", args: []string{"help"}, wantStdout: "  showconf     show the WireGuard configuration of a node or of a Peer"},
		{name: "--help", args: []string{"--help"}, wantStdout: "  connect      join this machine to the mesh as the Peer PEER"},
		{name: "help of a command", args: []string{"help", "graph"}, wantStdout: "kilofed graph | dot -Tsvg > mesh-topology.svg"},
		{name: "command --help", args: []string{"connect", "-h"}, wantStdout: "--create"},
		{name: "unknown command", args: []string{"join"}, wantCode: 2, wantStderr: `kilofed: unknown command "join"`},
		{name: "unknown flag", args: []string{"graph", "--granularity", "full"}, wantCode: 2,
			wantStderr: "kilofed graph: invalid command line: unknown flag: --granularity\nusage: kilofed graph"},
		{name: "global flags before the command", args: []string{"--kubeconfig", "/a", "--context", "b", "probe"}, wantKubeconfig: "/a b"},
		{name: "global flags after the command", args: []string{"probe", "--kubeconfig=/c", "--context", "d"}, wantKubeconfig: "/c d"},
		{name: "bad granularity", args: []string{"graph", "--mesh-granularity", "region"}, wantCode: 2, wantStderr: `--mesh-granularity "region": invalid value: use location, full or cross`},
		{name: "connect without key", args: []string{"connect", "seb-laptop", "--private-key-file", "/nonexistent/seb.key"}, wantCode: 1,
			wantStderr: "pass --private-key-file with the key whose public half is Peer seb-laptop's publicKey, or --create --allowed-ips CIDR"},
		{name: "connect --allowed-ips without --create", args: []string{"connect", "seb-laptop", "--allowed-ips", "10.5.100.10/32"}, wantCode: 2,
			wantStderr: "--create needs --allowed-ips, and --allowed-ips needs --create"},
		{name: "connect without peer", args: []string{"connect"}, wantCode: 2, wantStderr: "want one PEER name"},
		{name: "bad subnet", args: []string{"graph", "--subnet", "10.5.0.0"}, wantCode: 2, wantStderr: `--subnet "10.5.0.0" is not a CIDR`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			sawKubeconfig, sawContext = "", ""
			var stdout, stderr bytes.Buffer
			env := &Env{Program: "kilofed", Stdout: &stdout, Stderr: &stderr,
				OpenSource: func(context.Context, *Env, BackendFlags) (Source, error) { return NewFakeSource(seedSnapshot()), nil }}
			code := Main(t.Context(), env, cmds, tt.args)
			if code != tt.wantCode {
				t.Errorf("exit %d, want %d; stderr %q", code, tt.wantCode, stderr.String())
			}
			if !strings.Contains(stdout.String(), tt.wantStdout) {
				t.Errorf("stdout %q does not contain %q", stdout.String(), tt.wantStdout)
			}
			if !strings.Contains(stderr.String(), tt.wantStderr) {
				t.Errorf("stderr %q does not contain %q", stderr.String(), tt.wantStderr)
			}
			if tt.wantKubeconfig != "" && sawKubeconfig+" "+sawContext != tt.wantKubeconfig {
				t.Errorf("kubeconfig and context %q %q, want %q", sawKubeconfig, sawContext, tt.wantKubeconfig)
			}
		})
	}
}

func TestRESTConfigErrors(t *testing.T) {
	t.Setenv("KUBECONFIG", filepath.Join(t.TempDir(), "missing"))
	t.Setenv("HOME", t.TempDir())
	t.Setenv("KUBERNETES_SERVICE_HOST", "")
	if _, err := RESTConfig("", ""); err == nil || !strings.Contains(err.Error(), "pass --kubeconfig FILE, set KUBECONFIG, or create ~/.kube/config") {
		t.Errorf("no kubeconfig: error %v", err)
	}
	kc := filepath.Join(t.TempDir(), "kubeconfig")
	if err := os.WriteFile(kc, []byte(`apiVersion: v1
kind: Config
clusters: [{name: c, cluster: {server: "https://127.0.0.1:6443"}}]
users: [{name: u, user: {token: t}}]
contexts: [{name: a, context: {cluster: c, user: u}}]
current-context: a
`), 0o600); err != nil {
		t.Fatal(err)
	}
	rc, err := RESTConfig(kc, "")
	if err != nil || rc.Host != "https://127.0.0.1:6443" {
		t.Errorf("explicit kubeconfig: %v, %v", rc, err)
	}
	if _, err := RESTConfig(kc, "nope"); err == nil || !strings.Contains(err.Error(), `context "nope"`) {
		t.Errorf("unknown context: error %v", err)
	}
}

// TestCreatePeer checks connect --create's first half: a key is made and
// kept, the Peer created once, and a Peer with another key refused.
func TestCreatePeer(t *testing.T) {
	dir := t.TempDir()
	keyFile := filepath.Join(dir, "kilofed", "ci-runner.key")
	src := NewFakeSource(seedSnapshot())
	var stderr bytes.Buffer
	env := &Env{Program: "kgctl", Stdout: &bytes.Buffer{}, Stderr: &stderr}
	spec := v1alpha1.PeerSpec{AllowedIPs: []string{"10.5.100.30/32"}, PersistentKeepalive: 25}

	key, err := createPeer(t.Context(), env, src, "ci-runner", keyFile, spec)
	if err != nil {
		t.Fatal(err)
	}
	fi, err := os.Stat(keyFile)
	if err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("key file: %v, %v", fi, err)
	}
	if len(src.Created) != 1 || src.Created[0].Spec.PublicKey != key.PublicKey().String() ||
		src.Created[0].Spec.AllowedIPs[0] != "10.5.100.30/32" || src.Created[0].Spec.PersistentKeepalive != 25 {
		t.Fatalf("created %+v", src.Created)
	}
	m, err := Compute(src.Snapshot(), MeshFlags{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := m.NewPlan("ci-runner", key, "kfc0"); err != nil {
		t.Errorf("the created Peer cannot be joined: %v", err)
	}

	again, err := createPeer(t.Context(), env, src, "ci-runner", keyFile, spec)
	if err != nil || again != key || len(src.Created) != 1 {
		t.Errorf("second run: key changed %v, created %d, error %v", again != key, len(src.Created), err)
	}
	other := filepath.Join(dir, "other.key")
	k, _ := wgconf.GeneratePrivateKey()
	if err := os.WriteFile(other, []byte(k.Base64()), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := createPeer(t.Context(), env, src, "ci-runner", other, spec); !errors.Is(err, ErrKeyMismatch) {
		t.Errorf("another key: error %v, want ErrKeyMismatch", err)
	}
	if err := src.CreatePeer(t.Context(), PeerObject("ci-runner", peerConfigOf(seedPeers()[0]))); !errors.Is(err, k8s.ErrAlreadyExists) {
		t.Errorf("create twice: error %v, want ErrAlreadyExists", err)
	}
}
