//go:build linux

package services

import (
	"bytes"
	"context"
	"fmt"
	"net"
	"net/netip"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/kilofed/kilofed/e2e/lab"
	"github.com/kilofed/kilofed/servicesync"
)

// The helpers below are the minimum of e2e/federation's set-up (which
// lives in that package's test files): CRDs, agents, controllers, echo
// pods, probes.

// installCRDs applies the Peer CRD, the federation's and servicesync's
// (the MCS CRDs and ExportedService) with the real kubectl.
func installCRDs(ctx context.Context, t testing.TB, c *lab.Cluster) {
	t.Helper()
	root, err := lab.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range []string{
		filepath.Join(root, "mesh", "config", "crd", "kilo.squat.ai_peers.yaml"),
		filepath.Join(root, "federation", "config", "crd"),
		filepath.Join(root, "servicesync", "config", "crd"),
	} {
		if out, err := c.Kubectl(ctx, "apply", "-f", f); err != nil {
			t.Fatalf("cluster %s: kubectl apply -f %s: %v\n%s", c.Name, f, err, out)
		}
	}
	for _, crd := range []string{"peers.kilo.squat.ai", "clusterproperties.about.k8s.io", "announcements.federation.kilofed.io",
		"remoteclusters.federation.kilofed.io", "exportedservices.federation.kilofed.io",
		"serviceexports.multicluster.x-k8s.io", "serviceimports.multicluster.x-k8s.io"} {
		if out, err := c.Kubectl(ctx, "wait", "--for=condition=Established", "--timeout=30s", "crd/"+crd); err != nil {
			t.Fatalf("cluster %s: CRD %s not established: %v\n%s", c.Name, crd, err, out)
		}
	}
}

// startMesh runs kg on every node of c; Close of the lab stops them.
func startMesh(t testing.TB, c *lab.Cluster) map[string]*lab.Process {
	t.Helper()
	as := map[string]*lab.Process{}
	for _, n := range c.Nodes() {
		p, err := n.StartAgent(lab.AgentOptions{
			Binary: filepath.Join(binDir, "kg"), Granularity: "location", Encapsulate: "never",
			Extra: []string{"--resync-period=10s", "--log-level=debug"},
		})
		if err != nil {
			t.Fatalf("start kg on %s: %v", n.Name, err)
		}
		as[n.Name] = p
	}
	return as
}

// startController runs kilofed-controller (federation and servicesync)
// for c on the host, with c's admin kubeconfig.
//
// When c runs CoreDNS, the controller also serves clusterset.local on the
// lab's management bridge and c's CoreDNS forwards that zone to it, as the
// chart wires it.
func startController(t testing.TB, l *lab.Lab, c *lab.Cluster) *lab.Process {
	t.Helper()
	args := []string{"--kubeconfig=" + c.Kubeconfig, "--subnet=" + c.WireGuardSubnet.String(),
		"--resync-period=5s", "--poll=1s", "--listen=127.0.0.1:0", "--log-level=debug"}
	var dns netip.AddrPort
	if c.CoreDNSProcess() != nil {
		ln, err := net.Listen("tcp", netip.AddrPortFrom(l.HostIP(), 0).String())
		if err != nil {
			t.Fatal(err)
		}
		dns = netip.MustParseAddrPort(ln.Addr().String())
		ln.Close()
		args = append(args, "--dns-listen="+dns.String())
	}
	p, err := l.Start("kilofed-controller-"+c.Name, append([]string{filepath.Join(binDir, "kilofed-controller")}, args...)...)
	if err != nil {
		t.Fatalf("start kilofed-controller for %s: %v", c.Name, err)
	}
	if dns.IsValid() {
		if err := c.SetClusterSetDNS(context.Background(), dns); err != nil {
			t.Fatalf("cluster %s: forward clusterset.local to kilofed's DNS at %s: %v", c.Name, dns, err)
		}
	}
	return p
}

// kilofed runs the real kilofed CLI with the merged kubeconfig.
func kilofed(ctx context.Context, kubeconfig, kctx string, args ...string) (string, error) {
	cmd := exec.CommandContext(ctx, filepath.Join(binDir, "kilofed"), append([]string{"--kubeconfig", kubeconfig, "--context", kctx}, args...)...)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	err := cmd.Run()
	return out.String(), err
}

// probe makes one HTTP GET from pod from of c to ip:port and returns the
// answer's words: pod, cluster, node.
func probe(ctx context.Context, l *lab.Lab, c *lab.Cluster, from, ip string, port int, timeout time.Duration) ([]string, error) {
	url := "http://" + net.JoinHostPort(ip, fmt.Sprint(port)) + "/"
	out, err := l.PodExec(ctx, c.Name, "default", from, l.LabBinary(), "workload", "get", "--timeout", timeout.String(), url)
	if err != nil {
		return nil, err
	}
	f := strings.Fields(string(out))
	if len(f) < 2 {
		return nil, fmt.Errorf("short answer %q from %s", out, url)
	}
	return f, nil
}

// kclient returns a client of c that knows servicesync's types.
func kclient(t testing.TB, c *lab.Cluster) client.Client {
	t.Helper()
	k, err := client.New(c.RESTConfig(), client.Options{Scheme: servicesync.Scheme()})
	if err != nil {
		t.Fatal(err)
	}
	return k
}

// eventually calls f every 200 ms until it returns nil or within passes,
// and returns how long it took and the last error.
func eventually(ctx context.Context, within time.Duration, f func() error) (time.Duration, error) {
	start := time.Now()
	for {
		err := f()
		if err == nil || time.Since(start) > within || ctx.Err() != nil {
			return time.Since(start), err
		}
		time.Sleep(200 * time.Millisecond)
	}
}
