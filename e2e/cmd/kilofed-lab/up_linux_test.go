//go:build linux

package main

import (
	"bufio"
	"context"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/kilofed/kilofed/e2e/lab"
)

// TestUpPrintsAKubeconfigWithAContextPerCluster runs `kilofed-lab up
// -clusters 2` as a user would (what the MCS conformance suite is pointed
// at): it prints one kubeconfig holding a context per cluster, each context
// reaches its own cluster, whose kube-dns Service (CoreDNS) has the .10
// ClusterIP; Ctrl-C tears the lab down.
func TestUpPrintsAKubeconfigWithAContextPerCluster(t *testing.T) {
	bin := kilofedLab(t)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, "up", "-clusters", "2")
	logs := &syncBuffer{}
	cmd.Stderr = logs
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("kilofed-lab up log:\n%s", logs.String())
		}
	})
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := false
	defer func() {
		if !exited {
			_ = cmd.Process.Signal(syscall.SIGINT)
			_ = cmd.Wait()
		}
	}()
	lineRe := regexp.MustCompile(`^kubeconfig of every cluster: (\S+) \(contexts: (.*)\)$`)
	var path, contexts string
	sc := bufio.NewScanner(stdout)
	for sc.Scan() {
		if m := lineRe.FindStringSubmatch(sc.Text()); m != nil {
			path, contexts = m[1], m[2]
		}
		if strings.Contains(sc.Text(), "the lab runs") {
			break
		}
	}
	if path == "" {
		t.Fatalf("kilofed-lab up printed no kubeconfig line (scan: %v)", sc.Err())
	}
	go func() { _, _ = io.Copy(io.Discard, stdout) }()
	if contexts != "c1, c2" {
		t.Errorf("contexts %q, want \"c1, c2\"", contexts)
	}
	for i, name := range []string{"c1", "c2"} {
		cfg, err := clientcmd.NewNonInteractiveDeferredLoadingClientConfig(
			&clientcmd.ClientConfigLoadingRules{ExplicitPath: path},
			&clientcmd.ConfigOverrides{CurrentContext: name}).ClientConfig()
		if err != nil {
			t.Fatalf("context %s of %s: %v", name, path, err)
		}
		client, err := kubernetes.NewForConfig(cfg)
		if err != nil {
			t.Fatal(err)
		}
		nodes, err := client.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
		if err != nil {
			t.Fatalf("context %s: list nodes: %v", name, err)
		}
		if len(nodes.Items) != 4 {
			t.Errorf("context %s: %d nodes, want 4", name, len(nodes.Items))
		}
		svc, err := client.CoreV1().Services("kube-system").Get(ctx, lab.KubeDNSService, metav1.GetOptions{})
		if err != nil {
			t.Fatalf("context %s: kube-dns: %v", name, err)
		}
		// Cluster i's service CIDR is 10.(20+i).0.0/16 by default.
		if want := "10." + []string{"20", "21"}[i] + ".0.10"; svc.Spec.ClusterIP != want {
			t.Errorf("context %s: kube-dns ClusterIP %s, want %s", name, svc.Spec.ClusterIP, want)
		}
	}
	if err := cmd.Process.Signal(syscall.SIGINT); err != nil {
		t.Fatal(err)
	}
	err = cmd.Wait()
	exited = true
	if err != nil {
		t.Errorf("kilofed-lab up after Ctrl-C: %v", err)
	}
}

// kilofedLab skips (fails in CI) where the lab cannot run, and returns a
// kilofed-lab binary: $KILOFED_BIN/kilofed-lab, else one built from this
// package.
func kilofedLab(t *testing.T) string {
	t.Helper()
	if err := lab.Preflight(); err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("the lab cannot run on this machine (CI=true): %v", err)
		}
		t.Skipf("the lab cannot run on this machine: %v", err)
	}
	bin := filepath.Join(os.Getenv("KILOFED_BIN"), "kilofed-lab")
	if st, err := os.Stat(bin); os.Getenv("KILOFED_BIN") == "" || err != nil || st.IsDir() {
		bin = filepath.Join(t.TempDir(), "kilofed-lab")
		if out, err := exec.Command("go", "build", "-o", bin, ".").CombinedOutput(); err != nil {
			t.Fatalf("go build: %v\n%s", err, out)
		}
	}
	return bin
}

// syncBuffer is a strings.Builder safe for one writer and one reader.
type syncBuffer struct {
	mu  sync.Mutex
	buf strings.Builder
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}
