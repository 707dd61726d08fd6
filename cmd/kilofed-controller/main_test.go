package main

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/kilofed/kilofed/servicesync"
)

const testKubeconfig = `apiVersion: v1
kind: Config
clusters: [{name: c, cluster: {server: "https://127.0.0.1:6443"}}]
users: [{name: u, user: {token: t}}]
contexts: [{name: c, context: {cluster: c, user: u}}]
current-context: c
`

// TestLocalClientRateLimitIsSizedForServicesync proves that the controller's
// local client is not left at client-go's default of 5 requests/s (burst 10),
// which made 1000 exported services take 21-25 min to converge
// (docs/performance.md), and that the flags set it.
func TestLocalClientRateLimitIsSizedForServicesync(t *testing.T) {
	kc := filepath.Join(t.TempDir(), "kubeconfig")
	if err := os.WriteFile(kc, []byte(testKubeconfig), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name  string
		args  []string
		qps   float32
		burst int
	}{
		{"defaults", nil, servicesync.LocalQPS, servicesync.LocalBurst},
		{"flags", []string{"--kube-api-qps=7", "--kube-api-burst=9"}, 7, 9},
	} {
		t.Run(tc.name, func(t *testing.T) {
			o, err := parseFlags(append([]string{"--kubeconfig", kc}, tc.args...))
			if err != nil {
				t.Fatal(err)
			}
			cfg, err := o.restConfig()
			if err != nil {
				t.Fatal(err)
			}
			if cfg.QPS != tc.qps || cfg.Burst != tc.burst {
				t.Errorf("local client QPS %v burst %d, want %v and %d", cfg.QPS, cfg.Burst, tc.qps, tc.burst)
			}
		})
	}
	if servicesync.LocalQPS <= 5 || servicesync.LocalBurst <= 10 {
		t.Errorf("servicesync.LocalQPS %v, LocalBurst %d: no more than client-go's defaults", servicesync.LocalQPS, servicesync.LocalBurst)
	}
}
