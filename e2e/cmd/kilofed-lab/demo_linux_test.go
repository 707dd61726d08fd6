//go:build linux

package main

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/kilofed/kilofed/e2e/lab"
)

// demoBins returns a folder holding kg, kilofed and kilofed-controller:
// $KILOFED_BIN (make sets it), else one they are built into.
func demoBins(t *testing.T) string {
	t.Helper()
	dir, cleanup, err := lab.Commands("kg", "kilofed", "kilofed-controller")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cleanup)
	return dir
}

// TestDemoInstallsTheChartJoinsAndAnswersFromTheOtherCluster runs
// `kilofed-lab demo` (what `make demo` runs) and checks what it prints: the
// chart installed with helm in both clusters, the clusterset.local DNS
// answer (an IP of prod's Service range, the ServiceImport's), the HTTP
// answer of dr's echo pod, prod's topology in DOT with dr's gateway as a
// Peer and its SVG, `kilofed status` with dr's tunnel up, where to look
// next; and that the lab is gone once it exits: no folder, no network
// namespace, no process.
func TestDemoInstallsTheChartJoinsAndAnswersFromTheOtherCluster(t *testing.T) {
	bin := kilofedLab(t)
	bins := demoBins(t)
	before := netnsNames(t)
	svg := filepath.Join(t.TempDir(), "topology.svg")
	ctx, cancel := context.WithTimeout(context.Background(), 8*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, "demo", "--bin", bins, "--svg", svg)
	var stderr syncBuffer
	cmd.Stderr = &stderr
	began := time.Now()
	b, err := cmd.Output()
	out := string(b)
	t.Logf("kilofed-lab demo exited after %v: %v\n%s", time.Since(began).Round(100*time.Millisecond), err, out)
	if err != nil {
		t.Fatalf("kilofed-lab demo: %v\nstderr:\n%s", err, stderr.String())
	}

	for _, c := range []string{"prod", "dr"} {
		if !regexp.MustCompile(`(?m)^== \[\s*[\d.]+s\] \$ helm --kube-context ` + c + ` install kilofed \S*charts/kilofed --namespace kube-system --wait `).MatchString(out) {
			t.Errorf("no helm install of charts/kilofed in %s", c)
		}
		if !regexp.MustCompile(`(?m)^` + c + `: helm install --wait returned in `).MatchString(out) {
			t.Errorf("the helm install in %s did not return", c)
		}
		if !regexp.MustCompile(`(?m)^kilo-\S+\s+1/1\s+Running\s.*\s` + c + `-dc-1\s`).MatchString(out) {
			t.Errorf("no Running kilo pod (the chart's DaemonSet) on %s-dc-1", c)
		}
	}

	// DNS: an A record in prod's Service range.
	svcCIDR := regexp.MustCompile(`(?m)^prod\s+https://\S+\s+\S+\s+(\S+)\s`).FindStringSubmatch(out)
	a := regexp.MustCompile(`(?m)^echo\.default\.svc\.clusterset\.local\.\s+\d+\s+IN\s+A\s+(\S+)$`).FindStringSubmatch(out)
	if svcCIDR == nil || a == nil {
		t.Fatalf("no Service range of prod (%q) or no A record of echo.default.svc.clusterset.local (%q)", svcCIDR, a)
	}
	if p, ip := netip.MustParsePrefix(svcCIDR[1]), netip.MustParseAddr(a[1]); !p.Contains(ip) {
		t.Errorf("echo.default.svc.clusterset.local is %s, not in prod's Service range %s", ip, p)
	}
	// HTTP: dr's echo pod answers prod's client.
	if !regexp.MustCompile(`(?m)^answered from the other cluster \(pod cluster node\): echo-\S+ dr dr-dc-1$`).MatchString(out) {
		t.Error("no answer from dr's echo pod (echo-... dr dr-dc-1)")
	}
	// Topology: prod's graph holds its two locations and dr's gateway as a Peer.
	for _, want := range []string{"digraph kilo {", `label="paris";`, `label="lyon-dc";`, `"peer/dr-gra"`} {
		if !strings.Contains(out, want) {
			t.Errorf("the topology shows no %s", want)
		}
	}
	if _, err := exec.LookPath("dot"); err == nil {
		pic, err := os.ReadFile(svg)
		if err != nil || !strings.Contains(string(pic), "<svg") || !strings.Contains(string(pic), "peer/dr&#45;gra") {
			t.Errorf("the SVG %s: %v, want an SVG picture with dr-gra as a Peer (%d bytes)", svg, err, len(pic))
		}
		if !strings.Contains(out, "SVG: "+svg) {
			t.Errorf("the demo does not print the SVG's path %s", svg)
		}
	}
	// Status: dr's gateway of gra (either node: both are public, the
	// location election picks one) with its tunnel up.
	if !regexp.MustCompile(`(?m)^CLUSTER\s+LOCATION\s+GATEWAY\s+ENDPOINT\s+KEY\s+HANDSHAKE\s+RX/TX\s+STATE$`).MatchString(out) ||
		!regexp.MustCompile(`(?m)^dr\s+gra\s+dr-gra-[12]\s+203\.0\.113\.\d+:51820\s.*\sago\s.*\sup$`).MatchString(out) {
		t.Error("kilofed status shows no tunnel up to dr's gateway of gra")
	}
	for _, want := range []string{"(contexts prod, dr)", "kilofed-lab up --federation"} {
		if !strings.Contains(out, want) {
			t.Errorf("where to look next: no %q", want)
		}
	}
	checkTornDown(t, out, before)
}

// TestDemoTearsTheLabDownOnCtrlC interrupts `kilofed-lab demo` once the
// chart's pods run and checks that it exits, saying so, with nothing of
// the lab left.
func TestDemoTearsTheLabDownOnCtrlC(t *testing.T) {
	bin := kilofedLab(t)
	bins := demoBins(t)
	before := netnsNames(t)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, "demo", "--bin", bins, "--svg", filepath.Join(t.TempDir(), "topology.svg"))
	var stderr syncBuffer
	cmd.Stderr = &stderr
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	var out strings.Builder
	sc := bufio.NewScanner(stdout)
	for sc.Scan() {
		fmt.Fprintln(&out, sc.Text())
		if strings.Contains(sc.Text(), "waiting for the mesh of prod") {
			break
		}
	}
	if err := cmd.Process.Signal(syscall.SIGINT); err != nil {
		t.Fatal(err)
	}
	rest, _ := io.ReadAll(stdout)
	out.Write(rest)
	err = cmd.Wait()
	t.Logf("kilofed-lab demo after Ctrl-C: %v\n%s", err, out.String())
	if err == nil {
		t.Errorf("kilofed-lab demo interrupted exited 0, want a failure")
	}
	if !strings.Contains(stderr.String(), "kilofed-lab demo interrupted") {
		t.Errorf("the interrupted demo does not say it was interrupted:\n%s", stderr.String())
	}
	checkTornDown(t, out.String(), before)
}

// checkTornDown checks that the demo whose output is out tore its lab down:
// it said so, its folder is gone, no network namespace that was not there
// before remains, and no process mentions the folder.
func checkTornDown(t *testing.T, out string, before map[string]bool) {
	t.Helper()
	m := regexp.MustCompile(`(?m)^== \[\s*[\d.]+s\] lab up \(folder (\S+)\)$`).FindStringSubmatch(out)
	if m == nil {
		t.Fatal("the demo printed no lab folder")
	}
	dir := m[1]
	if !regexp.MustCompile(`(?m)^torn down in [\d.]+s$`).MatchString(out) {
		t.Error("the demo did not say it tore the lab down")
	}
	if _, err := os.Stat(dir); !os.IsNotExist(err) {
		t.Errorf("the lab folder %s is still there (%v)", dir, err)
	}
	for name := range netnsNames(t) {
		if !before[name] {
			t.Errorf("network namespace %s left behind", name)
		}
	}
	procs, _ := filepath.Glob("/proc/[0-9]*/cmdline")
	for _, p := range procs {
		if b, err := os.ReadFile(p); err == nil && strings.Contains(string(b), dir) {
			t.Errorf("a process still runs from the lab folder: %s: %s", p, strings.ReplaceAll(string(b), "\x00", " "))
		}
	}
}

// netnsNames returns the names of the machine's network namespaces.
func netnsNames(t *testing.T) map[string]bool {
	t.Helper()
	b, err := exec.Command("ip", "netns", "list").Output()
	if err != nil {
		t.Fatalf("ip netns list: %v", err)
	}
	names := map[string]bool{}
	for _, line := range strings.Split(string(b), "\n") {
		if f := strings.Fields(line); len(f) > 0 {
			names[f[0]] = true
		}
	}
	return names
}
