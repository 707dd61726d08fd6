// Package k8stest starts a real Kubernetes API server (etcd and
// kube-apiserver from the lab binaries, through controller-runtime's envtest)
// with the mesh CRDs and the heartbeat Leases' namespace, for tests of the
// kilo.squat.ai API and of the Kubernetes backend.
//
// The binaries come from $KILOFED_LAB_BINS, else from the folder that
// e2e/labbins/build.sh prints. When they are missing, Start skips the test,
// or fails it when CI=true; when they are being built (a *.tmp file in the
// folder), it waits for them up to WaitForBins.
package k8stest

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"runtime"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	"github.com/kilofed/kilofed/mesh/k8s"
)

// Versions of the lab binaries, as pinned by e2e/labbins/build.sh.
const (
	kubernetesVersion = "v1.37.2"
	etcdVersion       = "v3.6.16"
)

// WaitForBins is how long Start waits for lab binaries that are being built.
var WaitForBins = 25 * time.Minute

// Env is a running API server.
type Env struct {
	// Config reaches the API server as an administrator.
	Config *rest.Config
	// Environment is the envtest environment, for AddUser.
	Environment *envtest.Environment
}

// BinsDir returns the folder holding the lab's etcd and kube-apiserver.
func BinsDir() string {
	if d := os.Getenv("KILOFED_LAB_BINS"); d != "" {
		return d
	}
	cache := os.Getenv("XDG_CACHE_HOME")
	if cache == "" {
		home, _ := os.UserHomeDir()
		cache = filepath.Join(home, ".cache")
	}
	return filepath.Join(cache, "kilofed", "lab-bins", "k8s-"+kubernetesVersion+"-etcd-"+etcdVersion)
}

// CRDDir returns the folder of the mesh module's generated CRDs.
func CRDDir() string {
	_, file, _, _ := runtime.Caller(0)
	return filepath.Join(filepath.Dir(file), "..", "..", "config", "crd")
}

// binsReady reports whether etcd and kube-apiserver are in dir.
func binsReady(dir string) bool {
	for _, name := range []string{"etcd", "kube-apiserver"} {
		if fi, err := os.Stat(filepath.Join(dir, name)); err != nil || fi.Mode()&0o111 == 0 {
			return false
		}
	}
	return true
}

// building reports whether build.sh is writing a binary into dir.
func building(dir string) bool {
	m, _ := filepath.Glob(filepath.Join(dir, "*.tmp"))
	return len(m) > 0
}

// startTimeout is how long Start waits for etcd and for kube-apiserver to
// become healthy, each try.
const startTimeout = 90 * time.Second

// Option changes what Start installs.
type Option func(*envtest.Environment)

// WithoutCRDs starts the API server with no CRD installed, for tests of what
// happens where the mesh was never installed. Deleting a CRD instead waits
// for the API server's finalizer, which took over 30 s on a loaded machine.
func WithoutCRDs() Option {
	return func(e *envtest.Environment) {
		e.CRDDirectoryPaths = nil
		e.ErrorIfCRDPathMissing = false
	}
}

// Start starts an API server with the CRDs of config/crd installed and stops
// it when the test ends.
func Start(t testing.TB, opts ...Option) *Env {
	t.Helper()
	dir := BinsDir()
	deadline := time.Now().Add(WaitForBins)
	for !binsReady(dir) && building(dir) && time.Now().Before(deadline) {
		t.Logf("waiting for the lab binaries being built in %s", dir)
		time.Sleep(20 * time.Second)
	}
	if !binsReady(dir) {
		msg := "etcd and kube-apiserver are not in " + dir + ": run `make lab-bins` (e2e/labbins/build.sh) or set KILOFED_LAB_BINS"
		if os.Getenv("CI") == "true" {
			t.Fatal(msg)
		}
		t.Skip(msg)
	}
	env := &envtest.Environment{
		BinaryAssetsDirectory: dir,
		CRDDirectoryPaths:     []string{CRDDir()},
		ErrorIfCRDPathMissing: true,
	}
	// envtest gives each of etcd and kube-apiserver 20 s to become healthy,
	// and tries 5 times; on this 2-core machine, under a lab and a
	// benchmark, the API server took longer in all 5 (BenchmarkAPILoad).
	if os.Getenv("KUBEBUILDER_CONTROLPLANE_START_TIMEOUT") == "" {
		env.ControlPlaneStartTimeout = startTimeout
	}
	for _, o := range opts {
		o(env)
	}
	cfg, err := env.Start()
	if err != nil {
		t.Fatalf("start the API server from %s: %v", dir, err)
	}
	t.Cleanup(func() {
		if err := env.Stop(); err != nil && !errors.Is(err, os.ErrProcessDone) {
			t.Logf("stop the API server: %v", err)
		}
	})
	// The heartbeat Leases' namespace, which the agent's RBAC manifest
	// creates in a real cluster.
	kube, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: k8s.DefaultLeaseNamespace}}
	if _, err := kube.CoreV1().Namespaces().Create(context.Background(), ns, metav1.CreateOptions{}); err != nil {
		t.Fatalf("create namespace %s: %v", ns.Name, err)
	}
	return &Env{Config: cfg, Environment: env}
}
