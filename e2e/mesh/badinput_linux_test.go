//go:build linux

package mesh

import (
	"context"
	"fmt"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"golang.zx2c4.com/wireguard/wgctrl/wgtypes"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/kilofed/kilofed/e2e/lab"
)

func publicKey(t *testing.T) string {
	t.Helper()
	k, err := wgtypes.GeneratePrivateKey()
	if err != nil {
		t.Fatal(err)
	}
	return k.PublicKey().String()
}

// applyYAML pipes doc into the real kubectl apply.
func applyYAML(ctx context.Context, l *lab.Lab, c *lab.Cluster, doc string) (string, error) {
	cmd := exec.CommandContext(ctx, filepath.Join(l.Bins(), "kubectl"), "--kubeconfig", c.Kubeconfig, "apply", "-f", "-")
	cmd.Stdin = strings.NewReader(doc)
	out, err := cmd.CombinedOutput()
	return string(out), err
}

func TestMeshKeepsWorkingWithBadInputAndReportsIt(t *testing.T) {
	ctx, l, c, ips := startMetaCloud(t, metaCloud(), 6*time.Minute)
	as := startMesh(t, c, meshOptions{granularity: "location", encapsulate: "never"})
	pairs := map[string]string{"echo-scw-2": ips["echo-scw-2"], "echo-dc-2": ips["echo-dc-2"], "echo-aws-1": ips["echo-aws-1"]}
	checkAllPairs(ctx, t, l, c, pairs, 60*time.Second)

	// A Node with no address, no podCIDR and no location (an agent that
	// never started), and a malformed annotation on a live node.
	ghost := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "ghost"}}
	if _, err := c.Client().CoreV1().Nodes().Create(ctx, ghost, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if out, err := c.Kubectl(ctx, "annotate", "node", "scw-2", "kilo.squat.ai/allowed-location-ips=not-a-cidr"); err != nil {
		t.Fatalf("annotate: %v\n%s", err, out)
	}

	// The API server rejects a Peer with a bad key, with a readable message.
	bad := "apiVersion: kilo.squat.ai/v1alpha1\nkind: Peer\nmetadata:\n  name: bad-key\nspec:\n  allowedIPs:\n    - 10.5.100.3/32\n  publicKey: DrClusterPublicKeyBase64==\n"
	if out, err := applyYAML(ctx, l, c, bad); err == nil || !strings.Contains(out, "wg pubkey") {
		t.Errorf("kubectl apply of a Peer with a 19-byte key: err=%v, output %q; want a rejection that explains the key format", err, out)
	}
	// Two Peers claim one address: the older keeps it, the newer is told why.
	peer := func(name string) string {
		return "apiVersion: kilo.squat.ai/v1alpha1\nkind: Peer\nmetadata:\n  name: " + name +
			"\nspec:\n  allowedIPs:\n    - 10.5.100.10/32\n  publicKey: " + publicKey(t) + "\n  persistentKeepalive: 25\n"
	}
	if out, err := applyYAML(ctx, l, c, peer("seb-laptop")); err != nil {
		t.Fatalf("apply seb-laptop: %v\n%s", err, out)
	}
	time.Sleep(1100 * time.Millisecond) // creation timestamps have second resolution
	if out, err := applyYAML(ctx, l, c, peer("copycat")); err != nil {
		t.Fatalf("apply copycat: %v\n%s", err, out)
	}
	accepted := func(name string) string {
		out, _ := c.Kubectl(ctx, "get", "peer", name, "-o", `jsonpath={.status.conditions[?(@.type=="Accepted")].reason}`)
		return strings.TrimSpace(string(out))
	}
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) && (accepted("seb-laptop") != "Valid" || accepted("copycat") != "AllowedIPsOverlap") {
		time.Sleep(300 * time.Millisecond)
	}
	if a, b := accepted("seb-laptop"), accepted("copycat"); a != "Valid" || b != "AllowedIPsOverlap" {
		t.Errorf("Accepted reasons: seb-laptop=%q copycat=%q, want Valid and AllowedIPsOverlap", a, b)
	}
	msg, _ := c.Kubectl(ctx, "get", "peer", "copycat", "-o", `jsonpath={.status.conditions[?(@.type=="Accepted")].message}`)
	t.Logf("copycat's Accepted message: %s", msg)

	// The mesh keeps carrying traffic, and says what is wrong on /metrics.
	checkAllPairs(ctx, t, l, c, pairs, 30*time.Second)
	leader := leaderOf(ctx, t, c, as, "scaleway-paris")

	// Someone deletes the leader's route to another location and flushes
	// kg's NAT chain (forward rules are opt-in, so that chain is the one kg
	// always keeps): the next resync (10 s here) puts both back.
	route, err := leader.Exec(ctx, "sh", "-c", "ip route show proto 75 dev kilo0 | head -1")
	if err != nil || strings.TrimSpace(string(route)) == "" {
		t.Fatalf("no kg route via kilo0 on %s: %q, %v", leader.Name, route, err)
	}
	dst := strings.Fields(string(route))[0]
	if out, err := leader.Exec(ctx, "sh", "-c", "ip route del "+dst+" dev kilo0 proto 75 && iptables -t nat -F KILOFED-NAT"); err != nil {
		t.Fatalf("break %s by hand: %v\n%s", leader.Name, err, out)
	}
	repaired := false
	for deadline := time.Now().Add(30 * time.Second); !repaired && time.Now().Before(deadline); time.Sleep(500 * time.Millisecond) {
		r, _ := leader.Exec(ctx, "sh", "-c", "ip route show "+dst+" proto 75")
		f, _ := leader.Exec(ctx, "iptables", "-t", "nat", "-S", "KILOFED-NAT")
		repaired = strings.Contains(string(r), "kilo0") && strings.Contains(string(f), "-j MASQUERADE")
	}
	if !repaired {
		t.Errorf("the route to %s and the KILOFED-NAT rules deleted by hand on %s were not restored by a resync", dst, leader.Name)
	}
	var metrics string
	for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline); time.Sleep(300 * time.Millisecond) {
		out, err := leader.Exec(ctx, l.LabBinary(), "workload", "get", fmt.Sprintf("http://127.0.0.1:%d/metrics", lab.AgentHTTPPort))
		if err == nil && strings.Contains(string(out), `kilo_problems{kind="node",severity="excluded"}`) &&
			strings.Contains(string(out), `kilo_problems{kind="object",severity="excluded"}`) {
			metrics = string(out)
			break
		}
		metrics = string(out)
	}
	for _, want := range []string{
		`kilo_problems{kind="node",severity="excluded"}`,
		`kilo_problems{kind="object",severity="excluded"}`,
		`kilo_leader{location="scaleway-paris"} 1`,
		"kilo_peers ",
		"kilo_reconciles_total ",
		"wireguard_receive_bytes_total",
		"kilo_peer_latest_handshake_seconds",
	} {
		if !strings.Contains(metrics, want) {
			t.Errorf("metrics of leader %s lack %q", leader.Name, want)
		}
	}
	if t.Failed() {
		t.Logf("metrics:\n%s", metrics)
	}
	out, err := leader.Exec(ctx, l.LabBinary(), "workload", "get", fmt.Sprintf("http://127.0.0.1:%d/health", lab.AgentHTTPPort))
	if err != nil || strings.TrimSpace(string(out)) != "ok" {
		t.Errorf("/health of %s = %q, %v; want ok despite bad input", leader.Name, out, err)
	}
}
