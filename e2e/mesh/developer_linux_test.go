//go:build linux

package mesh

import (
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/kilofed/kilofed/e2e/lab"
)

// TestDeveloperLaptopReachesPodsWithTheSeedCommands runs the French seed's
// "developer VPN access" flow from a laptop at home (behind NAT, with
// kubectl access to the cluster): wg genkey, the Peer applied with kubectl,
// kgctl showconf peer, then kgctl connect (kilofed's embedded stand-in for
// wg-quick up, as this machine has no WireGuard module), and checks that
// the laptop reaches pods in every location and a Service's ClusterIP.
func TestDeveloperLaptopReachesPodsWithTheSeedCommands(t *testing.T) {
	spec := metaCloud()
	spec.KubeProxy = true
	ctx, l, c, ips := startMetaCloud(t, spec, 6*time.Minute)
	startMesh(t, c, meshOptions{granularity: "location", encapsulate: "never"})
	svc, err := c.Client().CoreV1().Services("default").Create(ctx, lab.EchoService("default", "my-service", "echo", 80), metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}

	laptop, err := l.AddHost(ctx, "seb-laptop", lab.HostOptions{NAT: true, Mgmt: true})
	if err != nil {
		t.Fatal(err)
	}
	home := t.TempDir()
	kubeconfig := c.Kubeconfig
	sh := func(script string) string {
		t.Helper()
		full := "set -e; cd " + home + "; export PATH=" + binDir + ":" + l.Bins() + ":$PATH KUBECONFIG=" + kubeconfig + "; " + script
		out, err := laptop.Exec(ctx, "sh", "-c", full)
		if err != nil {
			t.Fatalf("on the laptop: %s\n%v\n%s", script, err, out)
		}
		return string(out)
	}
	// 1. The key pair, on the laptop.
	sh("wg genkey | tee dev-private.key | wg pubkey > dev-public.key")
	// 2. The Peer, exactly as the seed writes it.
	sh(`cat <<EOF | kubectl apply -f -
apiVersion: kilo.squat.ai/v1alpha1
kind: Peer
metadata:
  name: seb-laptop
spec:
  allowedIPs:
    - 10.5.100.10/32
  publicKey: $(cat dev-public.key)
  persistentKeepalive: 25
EOF`)
	// 3. The WireGuard configuration for the laptop.
	var conf string
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(500 * time.Millisecond) {
		conf = sh("kgctl showconf peer seb-laptop --private-key-file dev-private.key > wg-cluster.conf; cat wg-cluster.conf")
		if strings.Contains(conf, "Endpoint =") || time.Now().After(deadline) {
			break
		}
	}
	priv, err := os.ReadFile(filepath.Join(home, "dev-private.key"))
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"[Interface]", "PrivateKey = " + strings.TrimSpace(string(priv)), "Address = 10.5.100.10/32", "[Peer]", "Endpoint =", "PersistentKeepalive = 25", c.ServiceCIDR.String()} {
		if !strings.Contains(conf, want) {
			t.Errorf("kgctl showconf peer seb-laptop lacks %q:\n%s", want, conf)
		}
	}
	sh("wg-quick strip ./wg-cluster.conf > /dev/null") // wg-quick accepts the file
	// 4. Join: kgctl connect brings up an embedded WireGuard interface.
	conn, err := laptop.Start("connect", "sh", "-c", "cd "+home+" && mkdir -p /run/wireguard && mount -t tmpfs kfl-wg /run/wireguard && KUBECONFIG="+kubeconfig+
		" exec "+filepath.Join(binDir, "kgctl")+" connect seb-laptop --private-key-file dev-private.key")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("kgctl connect:\n%s", conn.Tail(40))
		}
		_ = conn.Stop()
	})
	// Pods in every location, including behind NAT, answer the laptop.
	for pod, ip := range ips {
		url := "http://" + net.JoinHostPort(ip, "8080") + "/"
		var got string
		var err error
		for deadline := time.Now().Add(45 * time.Second); time.Now().Before(deadline); time.Sleep(300 * time.Millisecond) {
			if got, err = laptop.Namespace().Get(ctx, url); err == nil {
				break
			}
		}
		if err != nil || !strings.HasPrefix(got, pod+" ") {
			t.Errorf("laptop -> %s (%s): %q, %v", pod, url, got, err)
		}
	}
	// And so does a Service's ClusterIP (kube-proxy on the gateway node).
	url := "http://" + net.JoinHostPort(svc.Spec.ClusterIP, "80") + "/"
	var got string
	for deadline := time.Now().Add(45 * time.Second); time.Now().Before(deadline); time.Sleep(300 * time.Millisecond) {
		if got, err = laptop.Namespace().Get(ctx, url); err == nil {
			break
		}
	}
	if err != nil || !strings.HasPrefix(got, "echo-") {
		t.Errorf("laptop -> ClusterIP %s: %q, %v", url, got, err)
	}
	// The Peer reports the handshake.
	var reason string
	for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline); time.Sleep(500 * time.Millisecond) {
		out, _ := c.Kubectl(ctx, "get", "peer", "seb-laptop", "-o", `jsonpath={.status.conditions[?(@.type=="Ready")].reason}`)
		if reason = strings.TrimSpace(string(out)); reason == "RecentHandshake" {
			break
		}
	}
	if reason != "RecentHandshake" {
		t.Errorf("Peer seb-laptop Ready reason %q, want RecentHandshake", reason)
	}
	out, _ := c.Kubectl(ctx, "get", "peers")
	t.Logf("kubectl get peers:\n%s", out)
}
