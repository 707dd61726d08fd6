//go:build linux

package examples

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/kilofed/kilofed/e2e/lab"
)

// developerVPNLab is examples/developer-vpn's cluster: one location of one
// node with a public address, kube-proxy and CoreDNS (the cluster DNS the
// laptop asks over the tunnel). The lab gives it the WireGuard subnet
// 10.5.0.0/16 (the seed's Peer address 10.5.100.10 is in it) and the
// service CIDR 10.20.0.0/16, kube-dns at 10.20.0.10.
func developerVPNLab() lab.Spec {
	return lab.Spec{KubeProxy: true, CoreDNS: true, Clusters: []lab.ClusterSpec{
		{Name: "dev", Locations: []lab.LocationSpec{{Name: "paris", Nodes: []lab.NodeSpec{{Name: "par-1"}}}}},
	}}
}

// TestDeveloperVPNExampleLaptopCurlsAServiceByItsClusterDNSNameOverTheTunnel
// runs examples/developer-vpn/README.md: my-service.yaml applied, then on a
// laptop behind a home NAT with kubectl access: the key pair (wg genkey |
// tee | wg pubkey), the seed's Peer (peer.yaml with the public key put in
// by sed), kgctl showconf peer seb-laptop into wg-cluster.conf (which
// wg-quick reads), kgctl connect seb-laptop --interface wg-cluster (the lab
// has no WireGuard kernel module for wg-quick up); with the laptop's resolver pointed at the kube-dns
// ClusterIP (the stand-in for the seed's resolvectl lines), curl of
// http://my-service.default.svc.cluster.local is answered by a my-service
// pod, and the kube-dns IP is routed through wg-cluster. Before the
// connection, the same curl gets no answer; after kubectl delete peer
// seb-laptop, none either.
func TestDeveloperVPNExampleLaptopCurlsAServiceByItsClusterDNSNameOverTheTunnel(t *testing.T) {
	begin := time.Now()
	l := lab.StartT(t, developerVPNLab())
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	c := l.Cluster("dev")
	dir := example(t, "developer-vpn")

	// Before you start: kilofed in the cluster (kg as a process).
	startMesh(t, c)

	// The service to reach.
	if out, err := shell(ctx, l, c.Kubeconfig, "kubectl apply -f "+filepath.Join(dir, "my-service.yaml")); err != nil {
		t.Fatalf("kubectl apply -f my-service.yaml: %v\n%s", err, out)
	}
	pods, err := c.WaitPods(ctx, "default", "app=my-service", 2)
	if err != nil {
		t.Fatal(err)
	}
	names := map[string]bool{}
	for _, p := range pods {
		names[p.Name] = true
	}

	// The laptop: at home behind NAT, with kubectl access to the API
	// server; the example's files copied to its working directory.
	laptop, err := l.AddHost(ctx, "seb-laptop", lab.HostOptions{NAT: true, Mgmt: true})
	if err != nil {
		t.Fatal(err)
	}
	home := t.TempDir()
	for _, f := range []string{"peer.yaml"} {
		b, err := os.ReadFile(filepath.Join(dir, f))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(home, f), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	// The laptop's resolver file (ip netns exec binds it over
	// /etc/resolv.conf); empty until step 4.
	etc := filepath.Join("/etc/netns", laptop.Netns)
	if err := os.MkdirAll(etc, 0o755); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = os.RemoveAll(etc) })
	resolv := filepath.Join(etc, "resolv.conf")
	if err := os.WriteFile(resolv, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	onLaptop := func(script string) (string, error) {
		full := "set -e; cd " + home + "; export PATH=" + binDir + ":" + l.Bins() + ":$PATH KUBECONFIG=" + c.Kubeconfig + "; " + script
		out, err := laptop.Exec(ctx, "sh", "-c", full)
		return string(out), err
	}
	run := func(script string) string {
		t.Helper()
		out, err := onLaptop(script)
		if err != nil {
			t.Fatalf("on the laptop: %s\n%v\n%s", script, err, out)
		}
		return out
	}

	// 1. The key pair.
	run("wg genkey | tee dev-private.key | wg pubkey > dev-public.key")
	// 2. The laptop as a Peer.
	run(`sed "s|DEV_PUBLIC_KEY|$(cat dev-public.key)|" peer.yaml | kubectl apply -f -`)
	if got, want := c.KubectlT(ctx, t, "get", "peer", "seb-laptop", "-o", "jsonpath={.spec.publicKey}"), strings.TrimSpace(run("cat dev-public.key")); got != want {
		t.Fatalf("Peer seb-laptop has publicKey %q, want dev-public.key's %q", got, want)
	}
	// 3. Its WireGuard configuration (the agent must have published the
	// location's endpoint first).
	var conf string
	if _, err := eventually(ctx, 30*time.Second, func() error {
		conf = run("kgctl showconf peer seb-laptop --private-key-file dev-private.key > wg-cluster.conf; cat wg-cluster.conf")
		if !strings.Contains(conf, "Endpoint =") {
			return fmt.Errorf("no Endpoint yet")
		}
		return nil
	}); err != nil {
		t.Fatalf("kgctl showconf peer seb-laptop:\n%s", conf)
	}
	t.Logf("kgctl showconf peer seb-laptop --private-key-file dev-private.key\n%s", strings.ReplaceAll(conf, strings.TrimSpace(run("cat dev-private.key")), "(dev-private.key)"))
	for _, want := range []string{"Address = 10.5.100.10/32", c.ServiceCIDR.String(), "PrivateKey = " + strings.TrimSpace(run("cat dev-private.key"))} {
		if !strings.Contains(conf, want) {
			t.Errorf("wg-cluster.conf lacks %q", want)
		}
	}
	if t.Failed() {
		t.FailNow()
	}

	// Before the tunnel: the cluster DNS does not answer the laptop.
	dnsIP := run("kubectl -n kube-system get service kube-dns -o jsonpath='{.spec.clusterIP}'")
	if dnsIP != c.ClusterDNS.String() {
		t.Fatalf("kube-dns ClusterIP %q, want %s", dnsIP, c.ClusterDNS)
	}
	if err := os.WriteFile(resolv, []byte("nameserver "+dnsIP+"\nsearch default.svc.cluster.local svc.cluster.local cluster.local\noptions timeout:1 attempts:1\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if out, err := onLaptop("curl -s --max-time 2 http://my-service.default.svc.cluster.local"); err == nil {
		t.Fatalf("curl answered before the tunnel is up: %s", out)
	}

	// 3'. Up: the lab's machine has no WireGuard kernel module, so
	// wg-quick up cannot run here; wg-quick reads the file (strip), and
	// kgctl connect applies the same configuration with its embedded
	// WireGuard, as the README says.
	run("wg-quick strip ./wg-cluster.conf > /dev/null")
	conn, err := laptop.Start("connect", "sh", "-c", "cd "+home+" && mkdir -p /run/wireguard && mount -t tmpfs kfl-wg /run/wireguard && "+
		"KUBECONFIG="+c.Kubeconfig+" exec "+filepath.Join(binDir, "kgctl")+" connect seb-laptop --private-key-file dev-private.key --interface wg-cluster")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("kgctl connect:\n%s", conn.Tail(40))
		}
		_ = conn.Stop()
	})

	// 4. DNS over the tunnel, then curl by the cluster DNS name.
	var answer string
	took, err := eventually(ctx, time.Minute, func() error {
		out, err := onLaptop("curl -s --max-time 2 http://my-service.default.svc.cluster.local")
		answer = strings.TrimSpace(out)
		if err != nil {
			return fmt.Errorf("%v: %s", err, out)
		}
		if f := strings.Fields(answer); len(f) < 2 || !names[f[0]] || f[1] != "dev" {
			return fmt.Errorf("answered %q, want a my-service pod", answer)
		}
		return nil
	})
	if err != nil {
		t.Fatalf("curl http://my-service.default.svc.cluster.local from the laptop after %v: %v", took.Round(time.Millisecond), err)
	}
	t.Logf("curl http://my-service.default.svc.cluster.local\n%s  (after %v)", answer, took.Round(time.Millisecond))
	if route := run("ip route get " + dnsIP); !strings.Contains(route, " dev wg-cluster ") {
		t.Errorf("ip route get %s on the laptop: %q, want dev wg-cluster", dnsIP, route)
	}

	// Revoke: kubectl delete peer seb-laptop; the gateway drops the
	// laptop, and the same curl gets no answer any more.
	c.KubectlT(ctx, t, "delete", "peer", "seb-laptop")
	took, err = eventually(ctx, 30*time.Second, func() error {
		if out, err := onLaptop("curl -s --max-time 2 http://my-service.default.svc.cluster.local"); err == nil {
			return fmt.Errorf("still answered: %s", out)
		}
		return nil
	})
	if err != nil {
		t.Fatalf("after kubectl delete peer seb-laptop, %v: %v", took.Round(time.Millisecond), err)
	}
	t.Logf("kubectl delete peer seb-laptop: no answer any more after %v", took.Round(time.Millisecond))
	t.Logf("total %v", time.Since(begin).Round(time.Millisecond))
}
