package k8s_test

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	"github.com/kilofed/kilofed/mesh/apis/kilo/v1alpha1"
	"github.com/kilofed/kilofed/mesh/k8s"
	"github.com/kilofed/kilofed/mesh/k8s/k8stest"
)

// TestClientRBAC runs an agent's calls as the kube-system/kilo
// ServiceAccount with only the committed RBAC.
func TestClientRBAC(t *testing.T) {
	env := k8stest.Start(t)
	ctx := t.Context()
	applyFile(t, env.Config, filepath.Join("..", "config", "rbac", "agent.yaml"))
	kube := kubernetes.NewForConfigOrDie(env.Config)
	makeNode(t, kube, "a", nil, nil, "10.0.1.1")
	cl, err := client.New(env.Config, client.Options{Scheme: runtimeScheme(t)})
	if err != nil {
		t.Fatal(err)
	}
	if err := cl.Create(ctx, &v1alpha1.Peer{ObjectMeta: metav1.ObjectMeta{Name: "p"}, Spec: v1alpha1.PeerSpec{AllowedIPs: []string{"10.5.100.10/32"}, PublicKey: keyC}}); err != nil {
		t.Fatal(err)
	}
	user, err := env.Environment.ControlPlane.AddUser(envtest.User{Name: "system:serviceaccount:kube-system:kilo"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	b, err := k8s.New(ctx, k8s.Config{RESTConfig: user.Config(), LeaseDuration: time.Second})
	if err != nil {
		t.Fatalf("New as the agent: %v", err)
	}
	if err := b.Heartbeat(ctx, "a"); err != nil {
		t.Errorf("heartbeat: %v", err)
	}
	if err := b.Heartbeat(ctx, "a"); err != nil {
		t.Errorf("second heartbeat: %v", err)
	}
	eventually(t, 10*time.Second, "a ready", func() bool { return ready(b, "a") })
	if err := b.PublishNode(ctx, "a", k8s.NodeAnnotations{Key: mustKey(t, keyA)}); err != nil {
		t.Errorf("publish: %v", err)
	}
	setStatus(t, b, "p", 1)
	if err := b.ReleaseHeartbeat(ctx, "a"); err != nil {
		t.Errorf("release: %v", err)
	}
	// Nothing more: the agent may not touch other namespaces' Leases.
	other := kubernetes.NewForConfigOrDie(user.Config())
	if _, err := other.CoordinationV1().Leases("default").List(ctx, metav1.ListOptions{}); !apierrors.IsForbidden(err) {
		t.Errorf("list leases in default: %v, want Forbidden", err)
	}
}

// TestNewWithoutCRD checks the error when the Peer CRD is missing.
func TestNewWithoutCRD(t *testing.T) {
	env := k8stest.Start(t, k8stest.WithoutCRDs())
	var err2 error
	eventually(t, 30*time.Second, "New fails", func() bool {
		ctx, cancel := context.WithTimeout(t.Context(), 5*time.Second)
		defer cancel()
		_, err2 = k8s.New(ctx, k8s.Config{RESTConfig: env.Config})
		return err2 != nil
	})
	if !errors.Is(err2, k8s.ErrNoPeerCRD) || !strings.Contains(err2.Error(), "kubectl apply -f") {
		t.Errorf("New = %v, want ErrNoPeerCRD with how to install it", err2)
	}
}

// applyFile creates every object of a multi-document YAML file that does
// not exist yet.
func applyFile(t *testing.T, cfg *rest.Config, file string) {
	t.Helper()
	data, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	cl, err := client.New(cfg, client.Options{})
	if err != nil {
		t.Fatal(err)
	}
	dec := utilyaml.NewYAMLOrJSONDecoder(bytes.NewReader(data), 4096)
	for {
		u := &unstructured.Unstructured{}
		if err := dec.Decode(&u.Object); err != nil {
			if err.Error() == "EOF" {
				return
			}
			t.Fatalf("%s: %v", file, err)
		}
		if len(u.Object) == 0 {
			continue
		}
		if err := cl.Create(t.Context(), u); err != nil && !apierrors.IsAlreadyExists(err) {
			t.Fatalf("create %s %s: %v", u.GetKind(), u.GetName(), err)
		}
	}
}
