package v1alpha1

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"sigs.k8s.io/yaml"
)

// controllerGen is the generator of the committed CRD; keep it equal to the
// version in doc.go's go:generate line.
const controllerGen = "sigs.k8s.io/controller-tools/cmd/controller-gen@v0.20.1"

// moduleRoot returns the mesh module's folder.
func moduleRoot(t *testing.T) string {
	t.Helper()
	_, file, _, _ := runtime.Caller(0)
	return filepath.Join(filepath.Dir(file), "..", "..", "..")
}

const crdFile = "config/crd/kilo.squat.ai_peers.yaml"

// runControllerGen runs controller-gen in the module with args and returns
// its standard output; it skips the test when controller-gen cannot run
// (no module cache, no proxy), or fails it under CI=true.
func runControllerGen(t *testing.T, args ...string) []byte {
	t.Helper()
	if testing.Short() {
		t.Skip("-short: not running controller-gen")
	}
	cmd := exec.Command("go", append([]string{"run", controllerGen}, args...)...)
	cmd.Dir = moduleRoot(t)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("controller-gen: %v\n%s", err, stderr.Bytes())
		}
		t.Skipf("controller-gen cannot run here (%v): %s", err, stderr.Bytes())
	}
	return out
}

// sameFile fails the test with a line diff when got differs from the
// committed file.
func sameFile(t *testing.T, file string, got []byte) {
	t.Helper()
	want, err := os.ReadFile(filepath.Join(moduleRoot(t), file))
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		t.Errorf("%s is out of date with the types; run `go generate ./apis/...` in mesh/. Diff (-committed +generated):\n%s",
			file, cmp.Diff(strings.Split(string(want), "\n"), strings.Split(string(got), "\n")))
	}
}

// TestCRDUpToDate regenerates the CRD from the types and compares it with the
// committed one.
func TestCRDUpToDate(t *testing.T) {
	out := t.TempDir()
	runControllerGen(t, "crd", "paths=./apis/...", "output:crd:dir="+out)
	got, err := os.ReadFile(filepath.Join(out, filepath.Base(crdFile)))
	if err != nil {
		t.Fatal(err)
	}
	sameFile(t, crdFile, got)
}

// TestDeepCopyUpToDate regenerates the deepcopy functions and compares them
// with the committed ones.
func TestDeepCopyUpToDate(t *testing.T) {
	got := runControllerGen(t, "object", "paths=./apis/...", "output:object:stdout")
	sameFile(t, "apis/kilo/v1alpha1/zz_generated.deepcopy.go", got)
}

// TestCRDSchema checks the parts of the committed CRD that the API relies on.
func TestCRDSchema(t *testing.T) {
	b, err := os.ReadFile(filepath.Join(moduleRoot(t), crdFile))
	if err != nil {
		t.Fatal(err)
	}
	var crd map[string]any
	if err := yaml.Unmarshal(b, &crd); err != nil {
		t.Fatal(err)
	}
	get := func(path ...any) any {
		var v any = crd
		for _, k := range path {
			switch k := k.(type) {
			case string:
				m, _ := v.(map[string]any)
				v = m[k]
			case int:
				l, _ := v.([]any)
				if k >= len(l) {
					return nil
				}
				v = l[k]
			}
		}
		return v
	}
	version := []any{"spec", "versions", 0}
	spec := append(append([]any{}, version...), "schema", "openAPIV3Schema", "properties", "spec")
	prop := func(name string, rest ...any) []any {
		return append(append(append([]any{}, spec...), "properties", name), rest...)
	}
	var columns []string
	for _, c := range get(append(version, "additionalPrinterColumns")...).([]any) {
		columns = append(columns, c.(map[string]any)["name"].(string))
	}
	for _, tc := range []struct {
		name string
		path []any
		want any
	}{
		{name: "metadata name", path: []any{"metadata", "name"}, want: PeerCRDName},
		{name: "group", path: []any{"spec", "group"}, want: GroupName},
		{name: "cluster-scoped", path: []any{"spec", "scope"}, want: "Cluster"},
		{name: "kind", path: []any{"spec", "names", "kind"}, want: PeerKind},
		{name: "version", path: append(version, "name"), want: "v1alpha1"},
		{name: "status subresource", path: append(version, "subresources", "status"), want: map[string]any{}},
		{name: "required spec fields", path: append(spec, "required"), want: []any{"allowedIPs", "publicKey"}},
		{name: "publicKey rule", path: prop("publicKey", "x-kubernetes-validations", 0, "rule"), want: "self.matches('" + keyPattern.String() + "')"},
		{name: "publicKey message", path: prop("publicKey", "x-kubernetes-validations", 0, "message"), want: "publicKey must be a WireGuard public key: 44 base64 characters as printed by `wg pubkey`"},
		{name: "presharedKey rule", path: prop("presharedKey", "x-kubernetes-validations", 0, "rule"), want: "self.matches('" + keyPattern.String() + "')"},
		{name: "allowedIPs items are CIDRs", path: prop("allowedIPs", "items", "x-kubernetes-validations", 0, "rule"), want: "isCIDR(self)"},
		{name: "allowedIPs not empty", path: prop("allowedIPs", "x-kubernetes-validations", 0, "rule"), want: "size(self) > 0"},
		{name: "keepalive minimum", path: prop("persistentKeepalive", "minimum"), want: float64(0)},
		{name: "keepalive maximum", path: prop("persistentKeepalive", "maximum"), want: float64(65535)},
		{name: "endpoint keeps both forms", path: prop("endpoint", "x-kubernetes-preserve-unknown-fields"), want: true},
		{name: "endpoint has no type", path: prop("endpoint", "type"), want: nil},
		{name: "printer columns", path: nil, want: []string{"Allowed IPs", "Endpoint", "Keepalive", "Latest Handshake", "Age", "Spec Endpoint"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var got any = columns
			if tc.path != nil {
				got = get(tc.path...)
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("%v (-want +got):\n%s", tc.path, diff)
			}
		})
	}
}
