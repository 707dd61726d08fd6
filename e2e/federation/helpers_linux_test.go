//go:build linux

package federation

import (
	"bytes"
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/go-logr/logr"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/kilofed/kilofed/e2e/lab"
)

// binDir holds kg, kilofed and kilofed-controller, built once by TestMain
// (or taken from KILOFED_BIN, which make sets).
var binDir string

func TestMain(m *testing.M) {
	code, err := run(m)
	if err != nil {
		fmt.Fprintln(os.Stderr, "e2e/federation:", err)
		if os.Getenv("CI") == "true" {
			os.Exit(1)
		}
	}
	os.Exit(code)
}

func run(m *testing.M) (int, error) {
	ctrllog.SetLogger(logr.Discard()) // the federation's clients log nothing here
	dir, cleanup, err := lab.Commands("kg", "kilofed", "kilofed-controller")
	if err != nil {
		return 1, err
	}
	defer cleanup()
	binDir = dir
	return m.Run(), nil
}

// twoClusters is the lab of the federation tests: prod and dr (their names
// become their cluster IDs), each with a public location and one behind NAT
// (whose nodes keep their mappings open with keepalives), two nodes each,
// with kube-proxy. The lab gives dr the seed's DR ranges (pods
// 10.11.0.0/16, services 10.21.0.0/16, WireGuard 10.6.0.0/16) and prod
// 10.10.0.0/16, 10.20.0.0/16 and 10.5.0.0/16.
func twoClusters() lab.Spec {
	keepalive := map[string]string{"kilo.squat.ai/persistent-keepalive": "10"}
	return lab.Spec{KubeProxy: true, Clusters: []lab.ClusterSpec{
		{Name: "prod", Locations: []lab.LocationSpec{
			{Name: "paris", Nodes: []lab.NodeSpec{{Name: "prod-par-1"}, {Name: "prod-par-2"}}},
			{Name: "lyon-dc", NAT: true, Nodes: []lab.NodeSpec{{Name: "prod-dc-1", Annotations: keepalive}, {Name: "prod-dc-2", Annotations: keepalive}}},
		}},
		{Name: "dr", Locations: []lab.LocationSpec{
			{Name: "gra", Nodes: []lab.NodeSpec{{Name: "dr-gra-1"}, {Name: "dr-gra-2"}}},
			{Name: "rbx-dc", NAT: true, Nodes: []lab.NodeSpec{{Name: "dr-dc-1", Annotations: keepalive}, {Name: "dr-dc-2", Annotations: keepalive}}},
		}},
	}}
}

// agents are the kg processes of a cluster, by node name.
type agents map[string]*lab.Process

// fed is the running federation lab.
type fed struct {
	l          *lab.Lab
	prod, dr   *lab.Cluster
	kubeconfig string // contexts "prod" and "dr"
	agents     map[string]agents
	ctls       map[string]*lab.Process
	ips        map[string]map[string]string // cluster -> pod -> IP
	metrics    map[string]string            // cluster -> its controller's /metrics address
}

// installCRDs applies the Peer CRD and the federation's three CRDs with
// the real kubectl.
func installCRDs(ctx context.Context, t testing.TB, c *lab.Cluster) {
	t.Helper()
	root, err := lab.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range []string{
		filepath.Join(root, "mesh", "config", "crd", "kilo.squat.ai_peers.yaml"),
		filepath.Join(root, "federation", "config", "crd"),
	} {
		if out, err := c.Kubectl(ctx, "apply", "-f", f); err != nil {
			t.Fatalf("cluster %s: kubectl apply -f %s: %v\n%s", c.Name, f, err, out)
		}
	}
	for _, crd := range []string{"peers.kilo.squat.ai", "clusterproperties.about.k8s.io", "announcements.federation.kilofed.io", "remoteclusters.federation.kilofed.io"} {
		if out, err := c.Kubectl(ctx, "wait", "--for=condition=Established", "--timeout=30s", "crd/"+crd); err != nil {
			t.Fatalf("cluster %s: CRD %s not established: %v\n%s", c.Name, crd, err, out)
		}
	}
}

// startAgent runs kg on node n.
func startAgent(t testing.TB, n *lab.Node) *lab.Process {
	t.Helper()
	p, err := n.StartAgent(lab.AgentOptions{
		Binary: filepath.Join(binDir, "kg"), Granularity: "location", Encapsulate: "never",
		Extra: []string{"--resync-period=10s", "--log-level=debug"},
	})
	if err != nil {
		t.Fatalf("start kg on %s: %v", n.Name, err)
	}
	return p
}

// startMesh runs kg on every node of c; Close of the lab stops them.
func startMesh(t testing.TB, c *lab.Cluster) agents {
	t.Helper()
	as := agents{}
	for _, n := range c.Nodes() {
		as[n.Name] = startAgent(t, n)
	}
	return as
}

// startController runs kilofed-controller for c on the host (which reaches
// every API server), with c's admin kubeconfig and the agents' subnet.
func startController(t testing.TB, l *lab.Lab, c *lab.Cluster, listen string) *lab.Process {
	t.Helper()
	p, err := l.Start("kilofed-controller-"+c.Name, filepath.Join(binDir, "kilofed-controller"),
		"--kubeconfig="+c.Kubeconfig, "--subnet="+c.WireGuardSubnet.String(),
		"--resync-period=5s", "--poll=1s", "--listen="+listen, "--log-level=debug")
	if err != nil {
		t.Fatalf("start kilofed-controller for %s: %v", c.Name, err)
	}
	return p
}

// kilofed runs the real kilofed CLI against the lab's merged kubeconfig
// with context kctx and returns its standard output and error.
func (f *fed) kilofed(ctx context.Context, kctx string, args ...string) (string, error) {
	argv := append([]string{"--kubeconfig", f.kubeconfig, "--context", kctx}, args...)
	cmd := exec.CommandContext(ctx, filepath.Join(binDir, "kilofed"), argv...)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	err := cmd.Run()
	return out.String(), err
}

// probe makes one HTTP GET from pod from (in cluster c) to ip:8080 with a
// short timeout and returns the answer's words: pod, cluster, node.
func probe(ctx context.Context, l *lab.Lab, c *lab.Cluster, from, ip string, timeout time.Duration) ([]string, error) {
	url := "http://" + net.JoinHostPort(ip, "8080") + "/"
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

// answer waits until pod from of c gets from ip:8080 the answer of a pod
// whose name starts with pod in cluster cluster; it returns the answer or
// the last error once within has passed.
func answer(ctx context.Context, l *lab.Lab, c *lab.Cluster, from, ip, pod, cluster string, within time.Duration) ([]string, error) {
	deadline := time.Now().Add(within)
	for {
		got, err := probe(ctx, l, c, from, ip, 2*time.Second)
		if err == nil && strings.HasPrefix(got[0], pod) && got[1] == cluster {
			return got, nil
		}
		if err == nil {
			err = fmt.Errorf("answered %q, want %s* of cluster %s", got, pod, cluster)
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			return got, err
		}
		time.Sleep(300 * time.Millisecond)
	}
}

// wg runs the wg tool against the embedded device of agent p.
func wg(ctx context.Context, p *lab.Process, args ...string) (string, error) {
	out, err := p.NsEnter(ctx, append([]string{"wg"}, args...)...)
	return string(out), err
}

// leaderOf waits until exactly one node of loc holds WireGuard peers and
// returns it.
func leaderOf(ctx context.Context, t testing.TB, c *lab.Cluster, as agents, loc string, within time.Duration) *lab.Node {
	t.Helper()
	var with []string
	for deadline := time.Now().Add(within); ; time.Sleep(300 * time.Millisecond) {
		with = with[:0]
		var leader *lab.Node
		for _, n := range c.Location(loc).Nodes() {
			if as[n.Name].Exited() {
				continue
			}
			out, err := wg(ctx, as[n.Name], "show", "kilo0", "peers")
			if err == nil && strings.TrimSpace(out) != "" {
				with = append(with, n.Name)
				leader = n
			}
		}
		if len(with) == 1 {
			return leader
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			break
		}
	}
	t.Fatalf("location %s/%s: nodes with WireGuard peers %v after %v, want exactly one leader", c.Name, loc, with, within)
	return nil
}

// inventory lists, in c, every object kind that join, the controller or
// unjoin could write, one "kind ns/name rv" line each, sorted.
func inventory(ctx context.Context, t testing.TB, c *lab.Cluster) []string {
	t.Helper()
	const kinds = "namespaces,serviceaccounts,secrets,roles,rolebindings,clusterroles,clusterrolebindings,peers.kilo.squat.ai,clusterproperties.about.k8s.io,announcements.federation.kilofed.io,remoteclusters.federation.kilofed.io"
	out, err := c.Kubectl(ctx, "get", kinds, "-A", "-o",
		`jsonpath={range .items[*]}{.kind} {.metadata.namespace}/{.metadata.name} {.metadata.resourceVersion}{"\n"}{end}`)
	if err != nil {
		t.Fatalf("cluster %s: list objects: %v\n%s", c.Name, err, out)
	}
	lines := strings.Split(strings.TrimSpace(string(out)), "\n")
	sort.Strings(lines)
	return lines
}
