package topology_test

import (
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
)

// TestCoreImportsNoAdapter holds the rule that the pure core owns its
// value types: neither topology nor wgconf depends, even indirectly, on a
// WireGuard implementation, netlink, or any mesh package outside topology.
func TestCoreImportsNoAdapter(t *testing.T) {
	goTool := filepath.Join(runtime.GOROOT(), "bin", "go")
	if _, err := exec.LookPath(goTool); err != nil {
		if goTool, err = exec.LookPath("go"); err != nil {
			t.Fatalf("the go command is needed to list dependencies: %v", err)
		}
	}
	out, err := exec.Command(goTool, "list", "-deps", ".", "./wgconf").CombinedOutput()
	if err != nil {
		t.Fatalf("go list -deps: %v\n%s", err, out)
	}
	const own = "github.com/kilofed/kilofed/mesh/topology"
	for _, dep := range strings.Fields(string(out)) {
		switch {
		case strings.Contains(dep, "wgctrl"), strings.HasPrefix(dep, "golang.zx2c4.com/wireguard"), strings.Contains(dep, "netlink"):
			t.Errorf("the core depends on %s, a WireGuard or netlink implementation", dep)
		case strings.HasPrefix(dep, "github.com/kilofed/kilofed/") && dep != own && !strings.HasPrefix(dep, own+"/"):
			t.Errorf("the core depends on %s, outside the topology packages", dep)
		}
	}
}
