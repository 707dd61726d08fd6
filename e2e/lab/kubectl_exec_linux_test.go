//go:build linux

package lab

import (
	"bytes"
	"context"
	"errors"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestSeedKubectlRunExecAndLogs runs the Chinese seed's verification
// commands verbatim with the real kubectl: `kubectl run` of the two test
// pods, `kubectl get pods -l app=test -o wide`, `kubectl exec ... -- ping
// -c 4 <pod IP>` and `kubectl logs`. The API server proxies exec and logs
// to the kubelet stand-ins' API.
//
// PodRoutes connects the nodes of one location only: reaching the Shanghai
// pod from Beijing is the mesh's job (e2e/mesh), so the ping here goes to a
// third test pod on node-beijing-2, in Beijing too.
func TestSeedKubectlRunExecAndLogs(t *testing.T) {
	l := StartT(t, Spec{Clusters: []ClusterSpec{SeedClusterSpec()}, PodRoutes: true})
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	c := l.Clusters()[0]
	kubectl := func(args ...string) string { t.Helper(); return c.KubectlT(ctx, t, args...) }

	// The seed's two commands, word for word (the shell's quotes removed).
	kubectl("run", "test-pod-beijing", "--image=alpine", "--restart=Never", "--labels=app=test",
		`--overrides={"spec": {"nodeName": "node-beijing"}}`, "--", "sleep", "3600")
	kubectl("run", "test-pod-shanghai", "--image=alpine", "--restart=Never", "--labels=app=test",
		`--overrides={"spec": {"nodeName": "node-shanghai"}}`, "--", "sleep", "3600")
	kubectl("run", "test-pod-beijing-2", "--image=alpine", "--restart=Never", "--labels=app=test",
		`--overrides={"spec": {"nodeName": "node-beijing-2"}}`, "--", "sleep", "3600")
	kubectl("run", "echo-logs", "--image=hashicorp/http-echo", "--restart=Never", "--port=8080",
		`--overrides={"spec": {"nodeName": "node-beijing"}}`)

	if _, err := c.WaitPods(ctx, "default", "app=test", 3); err != nil {
		t.Fatal(err)
	}
	if _, err := c.WaitPods(ctx, "default", "run=echo-logs", 1); err != nil {
		t.Fatal(err)
	}
	wide := kubectl("get", "pods", "-l", "app=test", "-o", "wide")
	t.Logf("kubectl get pods -l app=test -o wide:\n%s", wide)
	ip := podsWide(t, wide, map[string]string{
		"test-pod-beijing": "node-beijing", "test-pod-beijing-2": "node-beijing-2", "test-pod-shanghai": "node-shanghai",
	})

	t.Run("kubectl exec ping", func(t *testing.T) {
		out := kubectl("exec", "test-pod-beijing", "--", "ping", "-c", "4", ip["test-pod-beijing-2"])
		t.Logf("kubectl exec test-pod-beijing -- ping -c 4 %s:\n%s", ip["test-pod-beijing-2"], out)
		if !strings.Contains(out, "4 packets transmitted, 4 received") {
			t.Errorf("ping output lacks %q:\n%s", "4 packets transmitted, 4 received", out)
		}
	})
	t.Run("kubectl exec exit code", func(t *testing.T) {
		out, err := c.Kubectl(ctx, "exec", "test-pod-beijing", "--", "sh", "-c", "exit 3")
		var exitErr *exec.ExitError
		if !errors.As(err, &exitErr) || exitErr.ExitCode() != 3 {
			t.Errorf("kubectl exec -- sh -c 'exit 3' = %v (%s), want exit code 3", err, out)
		}
	})
	t.Run("kubectl exec runs in the pod network", func(t *testing.T) {
		out := kubectl("exec", "test-pod-beijing", "--", "ip", "-o", "-4", "addr", "show", "dev", "eth0")
		if !strings.Contains(out, " "+ip["test-pod-beijing"]+"/32 ") {
			t.Errorf("eth0 in the exec'd command's network:\n%s\nwant address %s/32", out, ip["test-pod-beijing"])
		}
	})
	t.Run("kubectl exec -i passes stdin", func(t *testing.T) {
		cmd := exec.CommandContext(ctx, filepath.Join(l.Bins(), "kubectl"), "--kubeconfig="+c.Kubeconfig,
			"exec", "-i", "test-pod-beijing", "--", "tr", "a-z", "A-Z")
		cmd.Stdin = strings.NewReader("ni hao\n")
		var stderr bytes.Buffer
		cmd.Stderr = &stderr
		out, err := cmd.Output()
		if err != nil || string(out) != "NI HAO\n" {
			t.Errorf("kubectl exec -i -- tr a-z A-Z = %q, %v (%s); want %q", out, err, stderr.String(), "NI HAO\n")
		}
	})
	t.Run("kubectl logs -f follows the run to its end", func(t *testing.T) {
		kubectl("run", "sleeper", "--image=alpine", "--restart=Never", `--overrides={"spec": {"nodeName": "node-beijing-2"}}`, "--", "sleep", "3")
		if _, err := c.WaitPods(ctx, "default", "run=sleeper", 1); err != nil {
			t.Fatal(err)
		}
		began := time.Now()
		out := kubectl("logs", "-f", "sleeper")
		if !strings.Contains(out, "sleeping") || !strings.Contains(out, "sleep done") {
			t.Errorf("kubectl logs -f sleeper:\n%s\nwant the start and end lines", out)
		}
		if d := time.Since(began); d > 30*time.Second {
			t.Errorf("kubectl logs -f returned after %s, want soon after the 3 s run", d)
		}
	})
	t.Run("kubectl get nodes -o wide keeps the LAN and public addresses", func(t *testing.T) {
		out := kubectl("get", "nodes", "-o", "wide")
		found := false
		for _, line := range strings.Split(out, "\n") {
			if f := strings.Fields(line); len(f) > 6 && f[0] == "node-beijing" {
				found = true
				if f[5] != "10.0.1.10" || f[6] != "203.0.113.10" {
					t.Errorf("node-beijing INTERNAL-IP %s EXTERNAL-IP %s, want 10.0.1.10 203.0.113.10:\n%s", f[5], f[6], out)
				}
			}
		}
		if !found {
			t.Errorf("no node-beijing line in:\n%s", out)
		}
	})
	t.Run("kubectl logs", func(t *testing.T) {
		if out := kubectl("logs", "echo-logs"); !strings.Contains(out, "http echo serving") || strings.Contains(out, "--- ") {
			t.Errorf("kubectl logs echo-logs:\n%s\nwant the echo's start line and no run marker", out)
		}
		if out := kubectl("logs", "test-pod-beijing"); !strings.Contains(out, "sleeping") || !strings.Contains(out, "seconds=3600") {
			t.Errorf("kubectl logs test-pod-beijing:\n%s\nwant the sleep's start line", out)
		}
		if out := kubectl("logs", "--tail=1", "echo-logs"); strings.Count(out, "\n") != 1 {
			t.Errorf("kubectl logs --tail=1 echo-logs gave %d lines:\n%s", strings.Count(out, "\n"), out)
		}
	})
}

// podsWide checks the output of `kubectl get pods -o wide`: every pod of
// want is Running on its node with an IP. It returns the IPs by pod.
func podsWide(t *testing.T, out string, want map[string]string) map[string]string {
	t.Helper()
	ips := map[string]string{}
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if len(lines) < 1 || !strings.HasPrefix(strings.Join(strings.Fields(lines[0]), " "), "NAME READY STATUS RESTARTS AGE IP NODE") {
		t.Fatalf("unexpected header in:\n%s", out)
	}
	for _, line := range lines[1:] {
		f := strings.Fields(line)
		if len(f) < 7 {
			t.Fatalf("short line %q", line)
		}
		name, ready, status, ip, node := f[0], f[1], f[2], f[5], f[6]
		if want[name] == "" {
			continue
		}
		if ready != "1/1" || status != "Running" || node != want[name] || ip == "<none>" {
			t.Errorf("pod %s: ready %s status %s ip %s node %s; want 1/1 Running with an IP on %s", name, ready, status, ip, node, want[name])
		}
		ips[name] = ip
	}
	if len(ips) != len(want) {
		t.Fatalf("pods listed %v, want %v", ips, want)
	}
	return ips
}
