//go:build linux

package mesh

import (
	"context"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/kilofed/kilofed/e2e/lab"
)

// binDir holds kg, kilofed and kgctl, built once by TestMain (or taken from
// KILOFED_BIN, which make sets).
var binDir string

func TestMain(m *testing.M) {
	code, err := run(m)
	if err != nil {
		fmt.Fprintln(os.Stderr, "e2e/mesh:", err)
		if os.Getenv("CI") == "true" {
			os.Exit(1)
		}
	}
	os.Exit(code)
}

func run(m *testing.M) (int, error) {
	dir, cleanup, err := lab.Commands("kg", "kgctl", "kilofed")
	if err != nil {
		return 1, err
	}
	defer cleanup()
	binDir = dir
	return m.Run(), nil
}

// startMetaCloud starts spec (metaCloud or a variant), installs the Peer
// CRD and an HTTP echo pod on every node, and returns the lab, the cluster,
// the pods' IPs by pod name and a context bounded by timeout.
func startMetaCloud(t testing.TB, spec lab.Spec, timeout time.Duration) (context.Context, *lab.Lab, *lab.Cluster, map[string]string) {
	t.Helper()
	l := lab.StartT(t, spec)
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	t.Cleanup(cancel)
	c := l.Cluster("meta")
	installCRD(ctx, t, c)
	return ctx, l, c, lab.EchoPodsT(ctx, t, c)
}

// meshOptions are the kg flags a test varies.
type meshOptions struct {
	granularity string
	encapsulate string
	extra       []string
}

// agents are the kg processes of a cluster, by node name.
type agents map[string]*lab.Process

// installCRD applies the Peer CRD with the real kubectl.
func installCRD(ctx context.Context, t testing.TB, c *lab.Cluster) {
	t.Helper()
	root, err := lab.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	crd := filepath.Join(root, "mesh", "config", "crd", "kilo.squat.ai_peers.yaml")
	if out, err := c.Kubectl(ctx, "apply", "-f", crd); err != nil {
		t.Fatalf("install the Peer CRD: %v\n%s", err, out)
	}
	if out, err := c.Kubectl(ctx, "wait", "--for=condition=Established", "--timeout=30s", "crd/peers.kilo.squat.ai"); err != nil {
		t.Fatalf("Peer CRD not established: %v\n%s", err, out)
	}
}

// startAgent runs kg on node n, with a private /run/wireguard so that every
// node's embedded WireGuard can be called kilo0 as in production.
func startAgent(t testing.TB, n *lab.Node, o meshOptions) *lab.Process {
	t.Helper()
	p, err := n.StartAgent(lab.AgentOptions{
		Binary: filepath.Join(binDir, "kg"), Granularity: o.granularity, Encapsulate: o.encapsulate,
		Extra: append([]string{"--resync-period=10s", "--log-level=debug"}, o.extra...),
	})
	if err != nil {
		t.Fatalf("start kg on %s: %v", n.Name, err)
	}
	return p
}

// startMesh runs kg on every node of c and stops them at the end of the test.
func startMesh(t testing.TB, c *lab.Cluster, o meshOptions) agents {
	t.Helper()
	as := agents{}
	for _, n := range c.Nodes() {
		as[n.Name] = startAgent(t, n, o)
	}
	t.Cleanup(func() {
		for name, p := range as {
			if t.Failed() {
				t.Logf("kg on %s, last lines:\n%s", name, p.Tail(40))
			}
			_ = p.Stop()
		}
	})
	return as
}

// wg runs the wg tool against the embedded device of agent p.
func wg(ctx context.Context, p *lab.Process, args ...string) (string, error) {
	out, err := p.NsEnter(ctx, append([]string{"wg"}, args...)...)
	return string(out), err
}

// get asks pod from (in cluster c) for url until it answers with want as
// the first word, or the deadline passes. It returns the last answer or error.
func get(ctx context.Context, l *lab.Lab, c *lab.Cluster, from, ip string, within time.Duration) (string, error) {
	url := "http://" + net.JoinHostPort(ip, "8080") + "/"
	deadline := time.Now().Add(within)
	for {
		got, err := l.PodGet(ctx, c.Name, "default", from, url)
		if err == nil || time.Now().After(deadline) {
			return got, err
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// probe makes one HTTP GET from pod from to ip:8080 with a short timeout
// and returns the first word of the answer (the answering pod's name).
func probe(ctx context.Context, l *lab.Lab, c *lab.Cluster, from, ip string, timeout time.Duration) (string, error) {
	url := "http://" + net.JoinHostPort(ip, "8080") + "/"
	out, err := l.PodExec(ctx, c.Name, "default", from, l.LabBinary(), "workload", "get", "--timeout", timeout.String(), url)
	if err != nil {
		return "", err
	}
	f := strings.Fields(string(out))
	if len(f) == 0 {
		return "", fmt.Errorf("empty answer from %s", url)
	}
	return f[0], nil
}

// leaderOf returns the node of loc whose kg holds WireGuard peers.
func leaderOf(ctx context.Context, t testing.TB, c *lab.Cluster, as agents, loc string) *lab.Node {
	t.Helper()
	var leaders []*lab.Node
	for _, n := range c.Location(loc).Nodes() {
		out, err := wg(ctx, as[n.Name], "show", "kilo0", "peers")
		if err == nil && strings.TrimSpace(out) != "" {
			leaders = append(leaders, n)
		}
	}
	if len(leaders) != 1 {
		t.Fatalf("location %s has %d nodes with WireGuard peers, want exactly one leader", loc, len(leaders))
	}
	return leaders[0]
}

// checkAllPairs checks that every echo pod reaches every other one.
func checkAllPairs(ctx context.Context, t testing.TB, l *lab.Lab, c *lab.Cluster, ips map[string]string, within time.Duration) {
	t.Helper()
	for from := range ips {
		for to, ip := range ips {
			if from == to {
				continue
			}
			got, err := get(ctx, l, c, from, ip, within)
			if err != nil {
				t.Errorf("%s -> %s (%s): %v", from, to, ip, err)
				continue
			}
			if first := strings.Fields(got); len(first) == 0 || first[0] != to {
				t.Errorf("%s -> %s (%s) answered %q", from, to, ip, got)
			}
		}
	}
}
