//go:build linux

package kubelet

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/go-logr/logr"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"
)

// Addresses of the privileged test: the node netns holds the node
// addresses on lo, pods come from the pod CIDRs.
var (
	ktNodeIP  = netip.MustParseAddr("10.231.0.10")
	ktNodeIP6 = netip.MustParseAddr("fd10:231::10")
	ktPodCIDR = []netip.Prefix{netip.MustParsePrefix("10.232.0.0/24"), netip.MustParsePrefix("fd10:232::/64")}
)

// failOrSkip fails under CI=true and skips otherwise.
func failOrSkip(t *testing.T, format string, args ...any) {
	t.Helper()
	if os.Getenv("CI") == "true" {
		t.Fatalf(format, args...)
	}
	t.Skipf(format, args...)
}

// labBins returns the lab-bins folder once etcd, kube-apiserver and kubectl
// are in it, waiting up to 25 minutes while a build is under way (the folder
// exists but a binary is missing).
func labBins(t *testing.T) string {
	t.Helper()
	dir := os.Getenv("KILOFED_LAB_BINS")
	if dir == "" {
		out, err := exec.Command("../../labbins/build.sh", "--print-dir").Output()
		if err != nil {
			failOrSkip(t, "cannot find the lab binaries folder (e2e/labbins/build.sh --print-dir: %v): run `make lab-bins`", err)
		}
		dir = strings.TrimSpace(string(out))
	}
	if _, err := os.Stat(dir); err != nil {
		failOrSkip(t, "lab binaries folder %s missing: run `make lab-bins`", dir)
	}
	deadline := time.Now().Add(25 * time.Minute)
	var logged time.Time
	for {
		var missing []string
		for _, b := range []string{"etcd", "kube-apiserver", "kubectl"} {
			if fi, err := os.Stat(filepath.Join(dir, b)); err != nil || fi.Mode()&0o111 == 0 {
				missing = append(missing, b)
			}
		}
		if len(missing) == 0 {
			return dir
		}
		if time.Now().After(deadline) {
			failOrSkip(t, "lab binaries %v still missing in %s after 25 minutes: run `make lab-bins`", missing, dir)
		}
		if time.Since(logged) > time.Minute {
			t.Logf("waiting for lab binaries %v in %s (being built?)", missing, dir)
			logged = time.Now()
		}
		time.Sleep(10 * time.Second)
	}
}

// randHex returns n random bytes in hex.
func randHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

// run runs a command and returns its combined output.
func run(t *testing.T, name string, args ...string) string {
	t.Helper()
	out, err := exec.Command(name, args...).CombinedOutput()
	if err != nil {
		t.Fatalf("%s %s: %v\n%s", name, strings.Join(args, " "), err, out)
	}
	return string(out)
}

// newNodeNetns creates the node namespace kfl-kt-<rand> with lo up, the node
// addresses on lo and forwarding on, removed at cleanup.
func newNodeNetns(t *testing.T) string {
	t.Helper()
	name := "kfl-kt-" + randHex(4)
	run(t, "ip", "netns", "add", name)
	t.Cleanup(func() {
		if out, err := exec.Command("ip", "netns", "del", name).CombinedOutput(); err != nil {
			t.Errorf("delete node netns %s: %v: %s", name, err, out)
		}
	})
	run(t, "ip", "-n", name, "link", "set", "lo", "up")
	run(t, "ip", "-n", name, "addr", "add", ktNodeIP.String()+"/32", "dev", "lo")
	run(t, "ip", "-n", name, "addr", "add", ktNodeIP6.String()+"/128", "dev", "lo")
	run(t, "ip", "netns", "exec", name, "sysctl", "-qw", "net.ipv4.ip_forward=1")
	return name
}

// workloadIn runs a workload subcommand (get, udp-send) inside netns.
func workloadIn(netns string, args ...string) (string, error) {
	self, err := os.Executable()
	if err != nil {
		return "", err
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	argv := append([]string{"netns", "exec", netns, "env", workloadEnv + "=1", self}, args...)
	cmd := exec.CommandContext(ctx, "ip", argv...)
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return string(out), fmt.Errorf("%s in %s: %w: %s", strings.Join(args, " "), netns, err, stderr.String())
	}
	return string(out), nil
}

// eventually polls cond every 200ms until it returns nil or timeout passes.
func eventually(t *testing.T, timeout time.Duration, what string, cond func() error) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		err := cond()
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: not true after %v: %v", what, timeout, err)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// netnsExists reports whether the named netns exists.
func netnsExists(name string) bool {
	_, err := os.Stat(filepath.Join(netnsRunDir, name))
	return err == nil
}

// startAPIServer starts etcd and kube-apiserver with envtest.
func startAPIServer(t *testing.T) kubernetes.Interface {
	t.Helper()
	return kubernetes.NewForConfigOrDie(startAPIServerConfig(t))
}

// startAPIServerConfig starts etcd and kube-apiserver with envtest and
// returns the admin config.
func startAPIServerConfig(t *testing.T) *rest.Config {
	t.Helper()
	ctrllog.SetLogger(logr.Discard())
	env := &envtest.Environment{
		BinaryAssetsDirectory:    labBins(t),
		ControlPlaneStartTimeout: 2 * time.Minute,
		ControlPlaneStopTimeout:  time.Minute,
	}
	cfg, err := env.Start()
	if err != nil {
		t.Fatalf("start envtest API server: %v", err)
	}
	t.Cleanup(func() {
		if err := env.Stop(); err != nil {
			t.Errorf("stop envtest: %v", err)
		}
	})
	// The API server makes default/kubernetes a moment after /readyz
	// answers (its bootstrap controller). A kubelet started before that
	// gives containers no KUBERNETES_SERVICE_* variables, as a real
	// kubelet does; a real cluster has the Service before any node joins.
	c := kubernetes.NewForConfigOrDie(cfg)
	eventually(t, time.Minute, "the API server's default/kubernetes Service", func() error {
		_, err := c.CoreV1().Services(metav1.NamespaceDefault).Get(context.Background(), "kubernetes", metav1.GetOptions{})
		return err
	})
	return cfg
}

// The lab's machine-wide locks (package lab's LiveLockPath and
// SetupLockPath; this package cannot import lab, which imports it). Every
// live lab holds the live lock shared; a sweeper takes it exclusively.
const (
	labLiveLock  = "/run/kfl-lab.lock"
	labSetupLock = "/run/kfl-lab.setup.lock"
)

// holdLabLock marks this test as a live lab for its whole life, so that a
// lab sweeper started by tests running in parallel leaves its kfl-
// namespaces and processes alone.
func holdLabLock(t *testing.T) {
	t.Helper()
	setup := flock(t, labSetupLock, syscall.LOCK_EX)
	live := flock(t, labLiveLock, syscall.LOCK_SH)
	setup.Close()
	t.Cleanup(func() { live.Close() })
}

// flock opens path and takes a flock of kind how, waiting up to 5 minutes.
func flock(t *testing.T, path string, how int) *os.File {
	t.Helper()
	f, err := os.OpenFile(path, os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		t.Fatalf("open lab lock: %v", err)
	}
	deadline := time.Now().Add(5 * time.Minute)
	for {
		err := syscall.Flock(int(f.Fd()), how|syscall.LOCK_NB)
		if err == nil {
			return f
		}
		if !errors.Is(err, syscall.EWOULDBLOCK) || time.Now().After(deadline) {
			f.Close()
			t.Fatalf("lock %s: %v", path, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}
