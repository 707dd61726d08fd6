//go:build linux

package mesh

import (
	"bufio"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/kilofed/kilofed/e2e/lab"
)

// kiloArgSets reads the kg args of Kilo's manifests from
// cmd/kg/testdata/kilo_manifest_args.txt and returns each distinct set once
// (by the first manifest that has it), without --kubeconfig and --hostname,
// which the lab gives, and without the webhook and the sets that need a
// userspace WireGuard sidecar (--create-interface=false).
func kiloArgSets(t *testing.T) (names []string, sets map[string][]string) {
	t.Helper()
	root, err := lab.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	f, err := os.Open(filepath.Join(root, "cmd", "kg", "testdata", "kilo_manifest_args.txt"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var blocks [][]string
	var blockNames []string
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		switch {
		case line == "" || strings.HasPrefix(line, "#"):
		case strings.HasPrefix(line, "== "):
			blockNames = append(blockNames, strings.Fields(strings.TrimPrefix(line, "== "))[0])
			blocks = append(blocks, []string{})
		default:
			blocks[len(blocks)-1] = append(blocks[len(blocks)-1], line)
		}
	}
	sets = map[string][]string{}
	seen := map[string]bool{}
	for i, b := range blocks {
		var args []string
		skip := false
		for _, a := range b {
			switch {
			case a == "webhook" || a == "--create-interface=false":
				skip = true
			case strings.HasPrefix(a, "--kubeconfig="), strings.HasPrefix(a, "--hostname="):
			default:
				args = append(args, a)
			}
		}
		key := strings.Join(args, " ")
		if skip || seen[key] {
			continue
		}
		seen[key] = true
		names = append(names, blockNames[i])
		sets[blockNames[i]] = args
	}
	return names, sets
}

// TestMeshRunsWithTheArgsOfKilosManifests starts kg on every node with the
// args of each of Kilo's DaemonSets ($(NODE_IP) expanded as the kubelet
// would) and checks that the mesh forms: every pod reaches every other.
// Where --local=false leaves the routes inside a location to the CNI
// (flannel, cilium), the test plays the CNI: each node routes its location
// mates' pod CIDRs to them over the LAN.
func TestMeshRunsWithTheArgsOfKilosManifests(t *testing.T) {
	names, sets := kiloArgSets(t)
	if len(names) < 3 {
		t.Fatalf("%d distinct arg sets in Kilo's manifests, want at least the plain, flannel and cilium ones", len(names))
	}
	ctx, l, c, ips := startMetaCloud(t, metaCloud(), 10*time.Minute)
	location := map[string]string{}
	for _, n := range c.Nodes() {
		location["echo-"+n.Name] = n.Location
	}
	for _, name := range names {
		args := sets[name]
		t.Run(name, func(t *testing.T) {
			t.Logf("kg %s", strings.Join(args, " "))
			as := agents{}
			for _, n := range c.Nodes() {
				extra := make([]string, len(args))
				for i, a := range args {
					extra[i] = strings.ReplaceAll(a, "$(NODE_IP)", n.LANIP.String())
				}
				as[n.Name] = startAgent(t, n, meshOptions{extra: extra})
			}
			t.Cleanup(func() {
				for name, p := range as {
					if t.Failed() {
						t.Logf("kg on %s, last lines:\n%s", name, p.Tail(40))
					}
					_ = p.Stop()
				}
			})
			// The first pair waits for the mesh to form; if it never does,
			// the others need not wait too.
			within := 90 * time.Second
			if contains(args, "--local=false") {
				cniRoutes(t, c)
			}
			for from := range ips {
				for to, ip := range ips {
					if from == to {
						continue
					}
					got, err := get(ctx, l, c, from, ip, within)
					if err != nil && within > 30*time.Second {
						t.Fatalf("%s -> %s (%s): %v: the mesh did not form", from, to, ip, err)
					}
					within = 30 * time.Second
					if err != nil {
						t.Errorf("%s -> %s (%s): %v", from, to, ip, err)
					} else if f := strings.Fields(got); len(f) == 0 || f[0] != to {
						t.Errorf("%s -> %s (%s) answered %q", from, to, ip, got)
					}
				}
			}
		})
	}
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// cniRoutes adds, on every node of c, a route to each location mate's pod
// CIDRs via the mate's LAN address, as a host-gw CNI would, and removes
// them when the test ends.
func cniRoutes(t *testing.T, c *lab.Cluster) {
	t.Helper()
	ctx := context.Background()
	for _, n := range c.Nodes() {
		for _, mate := range c.Location(n.Location).Nodes() {
			if mate == n {
				continue
			}
			for _, p := range mate.PodCIDRs() {
				if !p.Addr().Is4() {
					continue
				}
				if out, err := n.Exec(ctx, "ip", "route", "replace", p.String(), "via", mate.LANIP.String()); err != nil {
					t.Fatalf("CNI route on %s: %v\n%s", n.Name, err, out)
				}
				t.Cleanup(func() { _, _ = n.Exec(ctx, "ip", "route", "del", p.String(), "via", mate.LANIP.String()) })
			}
		}
	}
}
