//go:build linux

package examples

import (
	"bytes"
	"context"
	"fmt"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/kilofed/kilofed/e2e/lab"
)

// example returns the path of a file of examples/<name>.
func example(t testing.TB, name ...string) string {
	t.Helper()
	root, err := lab.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	p := filepath.Join(append([]string{root, "examples"}, name...)...)
	if _, err := os.Stat(p); err != nil {
		t.Fatal(err)
	}
	return p
}

// shell runs an example's script (or a command line) with sh, as a user
// would in a terminal: KUBECONFIG set to kubeconfig, the lab's kubectl and
// kilofed's commands first on PATH, env added.
func shell(ctx context.Context, l *lab.Lab, kubeconfig, script string, env ...string) (string, error) {
	cmd := exec.CommandContext(ctx, "sh", "-c", script)
	cmd.Env = append(os.Environ(), "KUBECONFIG="+kubeconfig, "PATH="+l.Bins()+":"+binDir+":"+os.Getenv("PATH"))
	cmd.Env = append(cmd.Env, env...)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	err := cmd.Run()
	return out.String(), err
}

// startMesh runs kg on every node of c with the examples' flags (location
// granularity; the lab's LANs are flat, so no encapsulation) and stops
// them at the end of the test.
func startMesh(t testing.TB, c *lab.Cluster, extra ...string) map[string]*lab.Process {
	t.Helper()
	as := map[string]*lab.Process{}
	for _, n := range c.Nodes() {
		p, err := n.StartAgent(lab.AgentOptions{
			Binary: filepath.Join(binDir, "kg"), Granularity: "location", Encapsulate: "never",
			Extra: append([]string{"--resync-period=10s"}, extra...),
		})
		if err != nil {
			t.Fatalf("start kg on %s: %v", n.Name, err)
		}
		as[n.Name] = p
	}
	t.Cleanup(func() {
		for name, p := range as {
			if t.Failed() {
				t.Logf("kg on %s, last lines:\n%s", name, p.Tail(30))
			}
			_ = p.Stop()
		}
	})
	return as
}

// startController runs kilofed-controller for c on the host with c's admin
// kubeconfig, its clusterset.local DNS server on the management bridge,
// and c's CoreDNS forwarding clusterset.local there (what the chart wires).
func startController(t testing.TB, l *lab.Lab, c *lab.Cluster) *lab.Process {
	t.Helper()
	ln, err := net.Listen("tcp", netip.AddrPortFrom(l.HostIP(), 0).String())
	if err != nil {
		t.Fatal(err)
	}
	dns := netip.MustParseAddrPort(ln.Addr().String())
	ln.Close()
	p, err := l.Start("kilofed-controller-"+c.Name, filepath.Join(binDir, "kilofed-controller"),
		"--kubeconfig="+c.Kubeconfig, "--subnet="+c.WireGuardSubnet.String(),
		"--resync-period=5s", "--poll=1s", "--listen=127.0.0.1:0", "--dns-listen="+dns.String())
	if err != nil {
		t.Fatalf("start kilofed-controller for %s: %v", c.Name, err)
	}
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("kilofed-controller of %s, last lines:\n%s", c.Name, p.Tail(60))
		}
	})
	if err := c.SetClusterSetDNS(context.Background(), dns); err != nil {
		t.Fatalf("cluster %s: forward clusterset.local to kilofed's DNS at %s: %v", c.Name, dns, err)
	}
	return p
}

// eventually calls f every 300 ms until it returns nil or within passes,
// and returns how long it took and the last error.
func eventually(ctx context.Context, within time.Duration, f func() error) (time.Duration, error) {
	start := time.Now()
	for {
		err := f()
		if err == nil || time.Since(start) > within || ctx.Err() != nil {
			return time.Since(start), err
		}
		time.Sleep(300 * time.Millisecond)
	}
}

// curl runs `kubectl exec [-n ns] target -- curl -s --max-time 3 url` in c
// and returns the answer's words.
func curl(ctx context.Context, c *lab.Cluster, ns, target, url string) ([]string, error) {
	out, err := c.Kubectl(ctx, "exec", "-n", ns, target, "--", "curl", "-s", "--max-time", "3", url)
	if err != nil {
		return nil, fmt.Errorf("kubectl exec -n %s %s -- curl %s: %w: %s", ns, target, url, err, out)
	}
	f := strings.Fields(string(out))
	if len(f) == 0 {
		return nil, fmt.Errorf("kubectl exec -n %s %s -- curl %s: empty answer", ns, target, url)
	}
	return f, nil
}

// handshakes returns, for the agent p, the peers of kilo0 by public key
// with the age of their latest handshake (-1: never).
func handshakes(ctx context.Context, p *lab.Process) (map[string]time.Duration, error) {
	out, err := p.NsEnter(ctx, "wg", "show", lab.AgentLink, "latest-handshakes")
	if err != nil {
		return nil, fmt.Errorf("wg show %s latest-handshakes: %w: %s", lab.AgentLink, err, out)
	}
	peers := map[string]time.Duration{}
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		f := strings.Fields(line)
		if len(f) != 2 {
			continue
		}
		var sec int64
		fmt.Sscan(f[1], &sec)
		if sec == 0 {
			peers[f[0]] = -1
		} else {
			peers[f[0]] = time.Since(time.Unix(sec, 0))
		}
	}
	return peers, nil
}
