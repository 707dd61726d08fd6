package v1alpha1_test

import (
	"encoding/json"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
	"sigs.k8s.io/yaml"

	"github.com/kilofed/kilofed/mesh/apis/kilo/v1alpha1"
	"github.com/kilofed/kilofed/mesh/k8s/k8stest"
)

const keyMessage = "publicKey must be a WireGuard public key: 44 base64 characters as printed by `wg pubkey`"

// readPeer reads a testdata manifest as it would be sent by kubectl.
func readPeer(t *testing.T, file string) *unstructured.Unstructured {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", file))
	if err != nil {
		t.Fatal(err)
	}
	u := &unstructured.Unstructured{}
	if err := yaml.Unmarshal(b, &u.Object); err != nil {
		t.Fatalf("%s: %v", file, err)
	}
	return u
}

// TestAPIServerValidation applies the seed Peers and bad ones to a real API
// server with the committed CRD.
func TestAPIServerValidation(t *testing.T) {
	env := k8stest.Start(t)
	ctx := t.Context()
	dyn := dynamic.NewForConfigOrDie(env.Config).Resource(v1alpha1.PeerResource)
	scheme := runtime.NewScheme()
	if err := v1alpha1.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	c, err := client.New(env.Config, client.Options{Scheme: scheme})
	if err != nil {
		t.Fatal(err)
	}

	for _, tc := range []struct {
		name   string
		file   string
		edit   func(u *unstructured.Unstructured)
		reject []string // substrings of the rejection; nil if accepted
		check  func(t *testing.T, p *v1alpha1.Peer)
	}{
		{name: "seed admin-workstation: 41-character placeholder key", file: "admin-workstation.yaml", reject: []string{"spec.publicKey", keyMessage}},
		{name: "seed admin-workstation with a real key", file: "admin-workstation-realkey.yaml", check: func(t *testing.T, p *v1alpha1.Peer) {
			if diff := cmp.Diff([]string{"10.5.100.2/32"}, p.Spec.AllowedIPs); diff != "" {
				t.Error(diff)
			}
			if p.Spec.PersistentKeepalive != 10 || p.Spec.Endpoint != nil {
				t.Errorf("keepalive %d endpoint %v, want 10 and none", p.Spec.PersistentKeepalive, p.Spec.Endpoint)
			}
		}},
		{name: "seed DR peer: placeholder key", file: "cluster-dr-ovhcloud.yaml", reject: []string{"spec.publicKey", keyMessage}},
		{name: "seed DR peer with a real key and a host:port endpoint", file: "cluster-dr-ovhcloud-realkey.yaml", check: func(t *testing.T, p *v1alpha1.Peer) {
			e := p.Spec.Endpoint
			if e == nil || e.DNS != "dr-gateway.example.com" || e.IP != "" || e.Port != 51820 || e.Validate() != nil {
				t.Errorf("endpoint = %+v, want DNS dr-gateway.example.com port 51820", e)
			}
		}},
		{name: "seed developer laptop", file: "seb-laptop.yaml"},
		{name: "Kilo object endpoint", file: "endpoint-object.yaml", check: func(t *testing.T, p *v1alpha1.Peer) {
			e := p.Spec.Endpoint
			if e == nil || e.IP != "203.0.113.7" || e.Port != 51821 || e.Validate() != nil {
				t.Errorf("endpoint = %+v, want 203.0.113.7:51821", e)
			}
		}},
		{name: "bad CIDR", file: "bad-cidr.yaml", reject: []string{"spec.allowedIPs[1]", "allowedIPs entry 10.300.0.0/16 is not a CIDR"}},
		{name: "missing publicKey", file: "no-public-key.yaml", reject: []string{"spec.publicKey: Required value"}},
		{name: "empty allowedIPs", file: "seb-laptop.yaml", edit: func(u *unstructured.Unstructured) {
			u.SetName("empty-allowed-ips")
			_ = unstructured.SetNestedSlice(u.Object, []any{}, "spec", "allowedIPs")
		}, reject: []string{"allowedIPs must list at least one CIDR"}},
		{name: "keepalive out of range", file: "seb-laptop.yaml", edit: func(u *unstructured.Unstructured) {
			u.SetName("keepalive")
			_ = unstructured.SetNestedField(u.Object, int64(70000), "spec", "persistentKeepalive")
		}, reject: []string{"spec.persistentKeepalive", "65535"}},
		{name: "bad preshared key", file: "seb-laptop.yaml", edit: func(u *unstructured.Unstructured) {
			u.SetName("psk")
			_ = unstructured.SetNestedField(u.Object, "secret", "spec", "presharedKey")
		}, reject: []string{"presharedKey must be a WireGuard key: 44 base64 characters as printed by `wg genpsk`"}},
		{name: "bad endpoint is stored and reported by Validate", file: "seb-laptop.yaml", edit: func(u *unstructured.Unstructured) {
			u.SetName("bad-endpoint")
			_ = unstructured.SetNestedField(u.Object, "no-port.example.com", "spec", "endpoint")
		}, check: func(t *testing.T, p *v1alpha1.Peer) {
			if err := p.Validate(); err == nil || !strings.Contains(err.Error(), "not host:port") {
				t.Errorf("Validate() = %v, want an endpoint error", err)
			}
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			u := readPeer(t, tc.file)
			if tc.edit != nil {
				tc.edit(u)
			}
			_, err := dyn.Create(ctx, u, metav1.CreateOptions{})
			if tc.reject != nil {
				if err == nil {
					t.Fatalf("created, want a rejection containing %q", tc.reject)
				}
				t.Logf("rejected: %v", err)
				if !apierrors.IsInvalid(err) {
					t.Errorf("error %v is not Invalid", err)
				}
				for _, s := range tc.reject {
					if !strings.Contains(err.Error(), s) {
						t.Errorf("rejection %q does not contain %q", err, s)
					}
				}
				return
			}
			if err != nil {
				t.Fatalf("rejected: %v", err)
			}
			var p v1alpha1.Peer
			if err := c.Get(ctx, client.ObjectKey{Name: u.GetName()}, &p); err != nil {
				t.Fatal(err)
			}
			if tc.check != nil {
				tc.check(t, &p)
			}
		})
	}

	t.Run("string endpoint is stored as written", func(t *testing.T) {
		u, err := dyn.Get(ctx, "cluster-dr-ovhcloud", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if got, _, _ := unstructured.NestedString(u.Object, "spec", "endpoint"); got != "dr-gateway.example.com:51820" {
			t.Errorf("stored endpoint = %v, want the string", u.Object["spec"])
		}
	})

	t.Run("status subresource", func(t *testing.T) {
		var p v1alpha1.Peer
		if err := c.Get(ctx, client.ObjectKey{Name: "seb-laptop"}, &p); err != nil {
			t.Fatal(err)
		}
		hs := metav1.NewTime(time.Now().Add(-5 * time.Second).Truncate(time.Second))
		want := v1alpha1.PeerStatus{
			ObservedGeneration: p.Generation,
			Conditions: []metav1.Condition{
				{Type: v1alpha1.ConditionAccepted, Status: metav1.ConditionTrue, Reason: v1alpha1.ReasonValid, Message: "configured", LastTransitionTime: hs},
				{Type: v1alpha1.ConditionReady, Status: metav1.ConditionTrue, Reason: v1alpha1.ReasonHandshake, Message: "handshake 5s ago", LastTransitionTime: hs},
			},
			LatestHandshake: &hs,
			Endpoint:        "198.51.100.20:40000",
			RxBytes:         1234,
			TxBytes:         5678,
			Node:            "node-a",
		}
		p.Status = want
		if err := c.Status().Update(ctx, &p); err != nil {
			t.Fatalf("update status: %v", err)
		}
		var got v1alpha1.Peer
		if err := c.Get(ctx, client.ObjectKey{Name: "seb-laptop"}, &got); err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff(want, got.Status); diff != "" {
			t.Errorf("status (-want +got):\n%s", diff)
		}
		if got.Generation != p.Generation {
			t.Errorf("a status update changed the generation: %d -> %d", p.Generation, got.Generation)
		}
	})

	t.Run("printer columns", func(t *testing.T) {
		hc, err := rest.HTTPClientFor(env.Config)
		if err != nil {
			t.Fatal(err)
		}
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, strings.TrimSuffix(env.Config.Host, "/")+"/apis/kilo.squat.ai/v1alpha1/peers/seb-laptop", nil)
		req.Header.Set("Accept", "application/json;as=Table;v=v1;g=meta.k8s.io")
		resp, err := hc.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(resp.Body)
		var table metav1.Table
		if err := json.Unmarshal(body, &table); err != nil {
			t.Fatalf("%v: %s", err, body)
		}
		var names []string
		for _, c := range table.ColumnDefinitions {
			names = append(names, c.Name)
		}
		if diff := cmp.Diff([]string{"Name", "Allowed IPs", "Endpoint", "Keepalive", "Latest Handshake", "Age", "Spec Endpoint"}, names); diff != "" {
			t.Errorf("columns (-want +got):\n%s", diff)
		}
		if len(table.Rows) != 1 {
			t.Fatalf("rows = %d, want 1", len(table.Rows))
		}
		cells := table.Rows[0].Cells
		if len(cells) < 4 || !strings.Contains(cells[1].(string), "10.5.100.10/32") || cells[2] != "198.51.100.20:40000" || cells[3] != float64(25) {
			t.Errorf("cells = %v, want allowed IPs, endpoint, keepalive 25", cells)
		}
	})

	t.Run("kubectl apply of the seed manifests", func(t *testing.T) {
		kubectl := filepath.Join(k8stest.BinsDir(), "kubectl")
		if _, err := os.Stat(kubectl); err != nil {
			t.Skipf("no kubectl in %s yet", k8stest.BinsDir())
		}
		user, err := env.Environment.ControlPlane.AddUser(envtest.User{Name: "admin", Groups: []string{"system:masters"}}, nil)
		if err != nil {
			t.Fatal(err)
		}
		kc, err := user.KubeConfig()
		if err != nil {
			t.Fatal(err)
		}
		kcFile := filepath.Join(t.TempDir(), "kubeconfig")
		if err := os.WriteFile(kcFile, kc, 0o600); err != nil {
			t.Fatal(err)
		}
		run := func(args ...string) (string, error) {
			cmd := exec.CommandContext(ctx, kubectl, append([]string{"--kubeconfig", kcFile}, args...)...)
			out, err := cmd.CombinedOutput()
			return string(out), err
		}
		if out, err := run("delete", "peer", "cluster-dr-ovhcloud", "seb-laptop"); err != nil {
			t.Fatalf("kubectl delete: %v\n%s", err, out)
		}
		for _, f := range []string{"cluster-dr-ovhcloud-realkey.yaml", "seb-laptop.yaml"} {
			if out, err := run("apply", "-f", filepath.Join("testdata", f)); err != nil {
				t.Errorf("kubectl apply -f %s: %v\n%s", f, err, out)
			}
		}
		out, err := run("apply", "-f", filepath.Join("testdata", "cluster-dr-ovhcloud.yaml"))
		if err == nil || !strings.Contains(out, keyMessage) {
			t.Errorf("kubectl apply of the placeholder key: %v\n%s\nwant a rejection with %q", err, out, keyMessage)
		}
		if out, err := run("get", "peers"); err != nil || !strings.Contains(out, "LATEST HANDSHAKE") {
			t.Errorf("kubectl get peers: %v\n%s", err, out)
		} else {
			t.Logf("kubectl get peers:\n%s", out)
		}
	})
}
