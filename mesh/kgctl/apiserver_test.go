package kgctl

import (
	"bytes"
	"context"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/client-go/kubernetes"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	"github.com/kilofed/kilofed/mesh/apis/kilo/v1alpha1"
	"github.com/kilofed/kilofed/mesh/k8s"
	"github.com/kilofed/kilofed/mesh/k8s/k8stest"
	"github.com/kilofed/kilofed/mesh/topology"
	"github.com/kilofed/kilofed/mesh/topology/wgconf"
)

// seedPeer returns one of the French seed's Peers, kept verbatim in the
// Peer API's testdata, with its placeholder key replaced by key.
func seedPeer(t *testing.T, file, placeholder string, key wgconf.Key) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("..", "apis", "kilo", "v1alpha1", "testdata", file))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(b), placeholder) {
		t.Fatalf("%s does not hold the placeholder %q", file, placeholder)
	}
	return strings.ReplaceAll(string(b), placeholder, key.String())
}

// TestAPIServer runs the CLI against a real API server holding the Chinese
// seed's Nodes, as their agents publish them, and the French seed's Peers,
// and checks that it shows what topology.PeerConf and topology.DOT give
// for the same cluster built by hand.
func TestAPIServer(t *testing.T) {
	env := k8stest.Start(t)
	ctx := t.Context()
	kube := kubernetes.NewForConfigOrDie(env.Config)
	admin, err := env.Environment.AddUser(envtest.User{Name: "admin", Groups: []string{"system:masters"}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	kc, err := admin.KubeConfig()
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	kubeconfig := filepath.Join(dir, "kubeconfig")
	keyFile := filepath.Join(dir, "dev-private.key")
	for path, data := range map[string]string{kubeconfig: string(kc), keyFile: privateKey("seb-laptop").Base64() + "\n"} {
		if err := os.WriteFile(path, []byte(data), 0o600); err != nil {
			t.Fatal(err)
		}
	}

	// The agents' side: Nodes registered by the kubelet, annotations
	// published and heartbeats renewed through the agents' own backend.
	agents, err := k8s.New(ctx, k8s.Config{RESTConfig: env.Config})
	if err != nil {
		t.Fatal(err)
	}
	want := seedSnapshot()
	for _, n := range want.Nodes {
		createNode(t, kube, n)
		pub := k8s.NodeAnnotations{Key: n.Key, InternalIP: n.InternalIP, WireGuardIP: n.WireGuardIP, Granularity: topology.LocationGranularity}
		if err := agents.PublishNode(ctx, n.Name, pub); err != nil {
			t.Fatal(err)
		}
		hctx, cancel := context.WithCancel(ctx)
		done := make(chan struct{})
		go func() {
			defer close(done)
			for t := time.NewTicker(time.Second); hctx.Err() == nil; <-t.C {
				_ = agents.Heartbeat(hctx, n.Name)
			}
		}()
		t.Cleanup(func() { cancel(); <-done })
	}

	// The users' side: the seed YAMLs applied, one Peer created by the CLI's source.
	scheme := runtime.NewScheme()
	if err := v1alpha1.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	cl, err := client.New(env.Config, client.Options{Scheme: scheme})
	if err != nil {
		t.Fatal(err)
	}
	for _, y := range []string{
		seedPeer(t, "seb-laptop.yaml", "rq3iv0e/ygoFaF5Hc38nwYov6HvfRrUi8mxazIua6Xo=", publicKey("seb-laptop")),
		seedPeer(t, "cluster-dr-ovhcloud.yaml", "DrClusterPublicKeyBase64==", publicKey("cluster-dr-ovhcloud")),
	} {
		u := &unstructured.Unstructured{}
		if err := utilyaml.NewYAMLOrJSONDecoder(strings.NewReader(y), 4096).Decode(&u.Object); err != nil {
			t.Fatal(err)
		}
		if err := cl.Create(ctx, u); err != nil {
			t.Fatalf("apply %s: %v", u.GetName(), err)
		}
	}
	src, err := NewClusterSource(ctx, k8s.Config{RESTConfig: env.Config})
	if err != nil {
		t.Fatal(err)
	}
	admin2 := PeerObject("admin-workstation", peerConfigOf(want.Peers[1]))
	if err := src.CreatePeer(ctx, admin2); err != nil {
		t.Fatal(err)
	}

	cli := func(args ...string) (string, string, int) {
		var stdout, stderr bytes.Buffer
		e := &Env{Program: "kgctl", Stdout: &stdout, Stderr: &stderr}
		code := Main(ctx, e, MeshCommands(), append([]string{"--kubeconfig", kubeconfig}, args...))
		return stdout.String(), stderr.String(), code
	}
	// The cluster built by hand: the inputs the agents should read, with
	// the options they run with.
	// The API server's own default ServiceCIDR is discovered too.
	if len(src.ServiceCIDRs) != 1 {
		t.Fatalf("discovered Service ranges %v, want the API server's one", src.ServiceCIDRs)
	}
	byHand, err := topology.New(want.Nodes, want.Peers, topology.Options{
		Subnet: pfx("10.5.0.0/16"), Granularity: topology.LocationGranularity, Encapsulate: topology.EncapsulateAlways,
		ServiceCIDRs: src.ServiceCIDRs,
	})
	if err != nil {
		t.Fatal(err)
	}

	t.Run("showconf peer", func(t *testing.T) {
		stdout, stderr, code := cli("showconf", "peer", "seb-laptop", "--private-key-file", keyFile, "-v")
		if code != 0 {
			t.Fatalf("exit %d: %s", code, stderr)
		}
		for _, note := range []string{"subnet 10.5.0.0/16 inferred", "granularity location inferred", "read from the cluster's ServiceCIDR objects"} {
			if !strings.Contains(stderr, note) {
				t.Errorf("stderr %q does not say %q", stderr, note)
			}
		}
		got, err := parseINI(stdout)
		if err != nil {
			t.Fatalf("%v\n%s", err, stdout)
		}
		wantConf, err := byHand.PeerConf("seb-laptop")
		if err != nil {
			t.Fatal(err)
		}
		wantConf.PrivateKey = privateKey("seb-laptop")
		for i := range wantConf.Peers {
			wantConf.Peers[i].Name = ""
		}
		if diff := cmp.Diff(wantConf, got, cmp.Comparer(func(a, b netip.Prefix) bool { return a == b }),
			cmp.Comparer(func(a, b netip.AddrPort) bool { return a == b })); diff != "" {
			t.Errorf("showconf peer differs from PeerConf (-want +got):\n%s\n%s", diff, stdout)
		}
	})

	t.Run("graph", func(t *testing.T) {
		stdout, stderr, code := cli("graph")
		if code != 0 {
			t.Fatalf("exit %d: %s", code, stderr)
		}
		if diff := cmp.Diff(byHand.DOT(), stdout); diff != "" {
			t.Errorf("graph differs from topology.DOT (-want +got):\n%s", diff)
		}
	})

	t.Run("showconf node -o yaml applies", func(t *testing.T) {
		stdout, stderr, code := cli("showconf", "node", "node-beijing", "-o", "yaml", "--peer-name", "cluster-prod",
			"--allowed-ips", "10.42.0.0/16,10.43.0.0/16", "--persistent-keepalive", "25s")
		if code != 0 {
			t.Fatalf("exit %d: %s", code, stderr)
		}
		// Applied in "another cluster": here the same API server, which
		// validates it with the CRD's schema.
		u := &unstructured.Unstructured{}
		if err := utilyaml.NewYAMLOrJSONDecoder(strings.NewReader(stdout), 4096).Decode(&u.Object); err != nil {
			t.Fatal(err)
		}
		if err := cl.Create(ctx, u); err != nil {
			t.Fatalf("apply:\n%s\n%v", stdout, err)
		}
		var p v1alpha1.Peer
		if err := cl.Get(ctx, client.ObjectKey{Name: "cluster-prod"}, &p); err != nil {
			t.Fatal(err)
		}
		if p.Spec.PublicKey != publicKey("node-beijing").String() || p.Spec.Endpoint.String() != "203.0.113.10:51820" || p.Spec.PersistentKeepalive != 25 {
			t.Errorf("applied Peer spec = %+v", p.Spec)
		}
	})

	t.Run("agents disagree", func(t *testing.T) {
		if err := agents.PublishNode(ctx, "node-shanghai", k8s.NodeAnnotations{Key: want.Nodes[1].Key, InternalIP: want.Nodes[1].InternalIP,
			WireGuardIP: want.Nodes[1].WireGuardIP, Granularity: topology.FullGranularity}); err != nil {
			t.Fatal(err)
		}
		_, stderr, code := cli("showconf", "peer", "seb-laptop")
		if code != 1 || !strings.Contains(stderr, "the agents disagree on the mesh granularity (kilo.squat.ai/granularity): full on node-shanghai; location on node-beijing") {
			t.Errorf("exit %d, stderr %q", code, stderr)
		}
	})
}

// createNode registers n as a kubelet would: labels, pod CIDR, addresses, Ready.
func createNode(t *testing.T, kube kubernetes.Interface, n topology.Node) {
	t.Helper()
	ctx := t.Context()
	obj := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: n.Name, Labels: map[string]string{k8s.DefaultTopologyLabel: n.Location}}}
	for _, p := range n.PodCIDRs {
		obj.Spec.PodCIDRs = append(obj.Spec.PodCIDRs, p.String())
	}
	obj.Spec.PodCIDR = obj.Spec.PodCIDRs[0]
	obj, err := kube.CoreV1().Nodes().Create(ctx, obj, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	obj.Status.Addresses = []corev1.NodeAddress{
		{Type: corev1.NodeInternalIP, Address: n.InternalIP.Addr().String()},
		{Type: corev1.NodeExternalIP, Address: n.ExternalIP.String()},
	}
	obj.Status.Conditions = []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue, LastHeartbeatTime: metav1.Now()}}
	if _, err := kube.CoreV1().Nodes().UpdateStatus(ctx, obj, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
}
