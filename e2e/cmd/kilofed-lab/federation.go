package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/kilofed/kilofed/e2e/lab"
)

// federationDemoTimeout bounds the federation demo from start-up to the
// last answer (teardown comes on top).
const federationDemoTimeout = 4 * time.Minute

// federationSpec is the demo's federation: production and its disaster
// recovery cluster, each with a public location and one behind NAT.
func federationSpec() lab.Spec {
	return lab.Spec{KubeProxy: true, CoreDNS: true, Clusters: []lab.ClusterSpec{
		{Name: "prod", Locations: []lab.LocationSpec{
			{Name: "paris", Nodes: []lab.NodeSpec{{Name: "prod-par-1"}, {Name: "prod-par-2"}}},
			{Name: "lyon-dc", NAT: true, Nodes: []lab.NodeSpec{{Name: "prod-dc-1"}}},
		}},
		{Name: "dr", Locations: []lab.LocationSpec{
			{Name: "gra", Nodes: []lab.NodeSpec{{Name: "dr-gra-1"}, {Name: "dr-gra-2"}}},
			{Name: "rbx-dc", NAT: true, Nodes: []lab.NodeSpec{{Name: "dr-dc-1"}}},
		}},
	}}
}

// exportYAML is what a user applies in dr to export the echo Service.
const exportYAML = `apiVersion: multicluster.x-k8s.io/v1beta1
kind: ServiceExport
metadata:
  name: echo
  namespace: default
`

// federationDemo starts two clusters, the mesh in each, kilofed-controller
// in each (federation, servicesync and clusterset.local DNS, with the
// lab's real CoreDNS forwarding clusterset.local to it), joins them with
// `kilofed join`, exports dr's echo Service, and shows a pod of prod (in a
// location behind NAT) answered by dr's pod (behind NAT too) through
// echo.default.svc.clusterset.local.
func federationDemo(ctx context.Context, logger *slog.Logger, args []string) (err error) {
	fs := flag.NewFlagSet("demo", flag.ContinueOnError)
	binFlag := fs.String("bin", "", "folder of kg, kilofed and kilofed-controller (default: next to kilofed-lab)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	bins, err := federationBinaries(*binFlag)
	if err != nil {
		return err
	}
	root, err := lab.RepoRoot()
	if err != nil {
		return fmt.Errorf("run kilofed-lab demo from the kilofed repository (it applies the CRDs from there): %w", err)
	}
	ctx, cancel := context.WithTimeout(ctx, federationDemoTimeout)
	defer cancel()
	began := time.Now()
	step := func(format string, a ...any) {
		fmt.Printf("\n== [%5.1fs] "+format+"\n", append([]any{time.Since(began).Seconds()}, a...)...)
	}
	l, err := lab.Start(ctx, federationSpec(), labOptions(logger)...)
	if err != nil {
		return errStep("start the lab", err)
	}
	all := agents{}
	defer func() {
		if err != nil && len(all) > 0 {
			fmt.Fprintln(os.Stderr, "kilofed-lab demo failed; the agents' last lines:"+agentTails(all))
		}
		fmt.Println("\n== tearing the lab down")
		err = errors.Join(err, l.Close())
	}()
	kubeconfig, err := l.Kubeconfig()
	if err != nil {
		return errStep("write the kubeconfig", err)
	}
	prod, dr := l.Cluster("prod"), l.Cluster("dr")
	step("lab up: two clusters, each with a public location and one behind NAT, joined only by the WAN\n\n%s", l.Describe())

	const ns = "default"
	if _, err := dr.Client().AppsV1().Deployments(ns).Create(ctx, lab.EchoDeployment(ns, "echo", "dr-dc-1", 1), metav1.CreateOptions{}); err != nil {
		return errStep("create dr's echo Deployment", err)
	}
	if _, err := dr.Client().CoreV1().Services(ns).Create(ctx, lab.EchoService(ns, "echo", "echo", 80), metav1.CreateOptions{}); err != nil {
		return errStep("create dr's echo Service", err)
	}
	if _, err := prod.Client().CoreV1().Pods(ns).Create(ctx, lab.SleepPod(ns, "client", "prod-dc-1"), metav1.CreateOptions{}); err != nil {
		return errStep("create prod's client pod", err)
	}

	if err := federate(ctx, l, root, bins, all); err != nil {
		return err
	}
	step("kg on every node and kilofed-controller in each cluster; each CoreDNS forwards clusterset.local to its kilofed-controller")

	echo, err := dr.WaitPods(ctx, ns, "app=echo", 1)
	if err != nil {
		return errStep("wait for dr's echo pod", err)
	}
	if _, err := prod.WaitPods(ctx, ns, "app=client", 1); err != nil {
		return errStep("wait for prod's client pod", err)
	}
	podURL := "http://" + net.JoinHostPort(echo[0].Status.PodIP, fmt.Sprint(lab.EchoPort)) + "/"
	step("before the join: prod's pod client (prod-dc-1, lyon-dc, behind NAT) GET %s (dr's pod %s on dr-dc-1, rbx-dc, behind NAT)", podURL, echo[0].Name)
	if out, err := l.PodExec(ctx, "prod", ns, "client", l.LabBinary(), "workload", "get", "--timeout", "2s", podURL); err == nil {
		return fmt.Errorf("prod's client reached dr's pod before the join (%q): the lab routes between clusters by itself, so the demo proves nothing", out)
	}
	fmt.Println("no answer: nothing routes between the clusters")

	step("$ kilofed --context prod join dr")
	join := exec.CommandContext(ctx, bins["kilofed"], "--kubeconfig", kubeconfig, "--context", "prod", "join", "dr", "--wait=2m")
	join.Stdout, join.Stderr = os.Stdout, os.Stdout
	if err := join.Run(); err != nil {
		return errStep("kilofed join", err)
	}

	exportFile := filepath.Join(l.Dir, "export-echo.yaml")
	if err := os.WriteFile(exportFile, []byte(exportYAML), 0o644); err != nil {
		return err
	}
	step("$ kubectl --context dr apply -f - <<EOF\n%sEOF", exportYAML)
	if out, err := dr.Kubectl(ctx, "apply", "-f", exportFile); err != nil {
		return errStep("export dr's echo Service", fmt.Errorf("%w\n%s", err, out))
	}
	var imports string
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(300 * time.Millisecond) {
		out, err := prod.Kubectl(ctx, "get", "serviceimports.multicluster.x-k8s.io", "-n", ns, "echo", "-o", "jsonpath={.spec.ips[0]}")
		if err == nil && strings.TrimSpace(string(out)) != "" {
			imports = strings.TrimSpace(string(out))
			break
		}
		if time.Now().After(deadline) {
			return errStep("wait for prod's ServiceImport of echo", fmt.Errorf("none with an IP within 30 s: %v %s", err, out))
		}
	}
	for _, args := range [][]string{
		{"get", "serviceimports.multicluster.x-k8s.io", "-n", ns},
		{"get", "endpointslices", "-n", ns, "-l", "multicluster.kubernetes.io/service-name=echo"},
	} {
		out, err := prod.Kubectl(ctx, args...)
		if err != nil {
			return errStep("kubectl "+strings.Join(args, " "), err)
		}
		fmt.Printf("\n$ kubectl --context prod %s\n%s", strings.Join(args, " "), out)
	}

	name := "echo." + ns + ".svc.clusterset.local"
	url := "http://" + name + "/"
	step("prod's pod client GET %s (CoreDNS -> kilofed's DNS: %s; kube-proxy on prod-dc-1; WireGuard through both clusters' gateways)", url, imports)
	answer, err := getUntil(ctx, l, "prod", ns, "client", url, 60*time.Second)
	if err != nil {
		return errStep("GET "+url+" from prod", err)
	}
	fmt.Printf("answered from the other cluster: %s\n", answer)

	step("$ kilofed --context prod status")
	status := exec.CommandContext(ctx, bins["kilofed"], "--kubeconfig", kubeconfig, "--context", "prod", "status")
	status.Stdout, status.Stderr = os.Stdout, os.Stdout
	if err := status.Run(); err != nil {
		return errStep("kilofed status", err)
	}
	step("done")
	return nil
}

// federate installs the federation and servicesync CRDs in every cluster of
// l, starts kg on every node (adding the agents to all) and
// kilofed-controller in each cluster with the cluster's CoreDNS forwarding
// clusterset.local to it, and waits for each mesh's leaders. It does not
// join the clusters.
func federate(ctx context.Context, l *lab.Lab, root string, bins map[string]string, all agents) error {
	for i, c := range l.Clusters() {
		for _, dir := range []string{filepath.Join("federation", "config", "crd"), filepath.Join("servicesync", "config", "crd")} {
			if out, err := c.Kubectl(ctx, "apply", "-f", filepath.Join(root, dir)); err != nil {
				return errStep("install the CRDs of "+dir+" in "+c.Name, fmt.Errorf("%w\n%s", err, out))
			}
		}
		as, err := startMesh(ctx, c, bins["kg"])
		if err != nil {
			return errStep("start kg in "+c.Name, err)
		}
		for name, p := range as {
			all[name] = p
		}
		dns := netip.AddrPortFrom(l.HostIP(), uint16(5353+i))
		if _, err := l.Start("kilofed-controller-"+c.Name, bins["kilofed-controller"],
			"--kubeconfig="+c.Kubeconfig, "--subnet="+c.WireGuardSubnet.String(),
			"--listen=127.0.0.1:0", "--dns-listen="+dns.String()); err != nil {
			return errStep("start kilofed-controller in "+c.Name, err)
		}
		if err := c.SetClusterSetDNS(ctx, dns); err != nil {
			return errStep("point "+c.Name+"'s CoreDNS at kilofed's DNS for clusterset.local", err)
		}
		if _, err := waitLeaders(ctx, c, as, 60*time.Second); err != nil {
			return errStep("wait for the mesh of "+c.Name, err)
		}
	}
	return nil
}

// federationBinaries finds kg, kilofed and kilofed-controller in dir, or
// next to this executable.
func federationBinaries(dir string) (map[string]string, error) {
	if dir == "" {
		exe, err := os.Executable()
		if err != nil {
			return nil, err
		}
		dir = filepath.Dir(exe)
	}
	dir, err := filepath.Abs(dir)
	if err != nil {
		return nil, err
	}
	out := map[string]string{}
	for _, name := range []string{"kg", "kilofed", "kilofed-controller"} {
		p := filepath.Join(dir, name)
		if !isExecutable(p) {
			return nil, fmt.Errorf("no %s in %s: build the binaries with `make build` (or give --bin DIR)", name, dir)
		}
		out[name] = p
	}
	return out, nil
}
