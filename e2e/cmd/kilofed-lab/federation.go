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
	"sync"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/kilofed/kilofed/e2e/lab"
)

// federationDemoTimeout bounds the federation demo from start-up to the
// last answer (teardown comes on top).
const federationDemoTimeout = 6 * time.Minute

// releaseNamespace is where the demo installs the chart's release, as seed
// 000 has it.
const releaseNamespace = "kube-system"

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

// progress prints the demo's steps, each with the time since the start.
type progress struct{ began time.Time }

func (p progress) step(format string, a ...any) {
	fmt.Printf("\n== [%5.1fs] "+format+"\n", append([]any{time.Since(p.began).Seconds()}, a...)...)
}

// federationDemo starts two clusters, installs kilofed in each with its
// Helm chart (the real helm CLI; the kubelet stand-ins run kg and
// kilofed-controller from the chart's images), points each cluster's
// CoreDNS at the chart's kilofed-dns Service for clusterset.local, joins
// the clusters with `kilofed join`, exports dr's echo Service, and shows a
// pod of prod (in a location behind NAT) resolving
// echo.default.svc.clusterset.local and answered by dr's pod (behind NAT
// too); then the topology, `kilofed status`, where to look next, and the
// teardown (also on failure and on Ctrl-C).
func federationDemo(ctx context.Context, logger *slog.Logger, args []string) (err error) {
	fs := flag.NewFlagSet("demo", flag.ContinueOnError)
	binFlag := fs.String("bin", "", "folder of kg, kilofed and kilofed-controller (default: next to kilofed-lab)")
	svg := fs.String("svg", filepath.Join(os.TempDir(), "kilofed-demo-topology.svg"), "where to write prod's topology graph (SVG, with graphviz)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	bins, err := federationBinaries(*binFlag)
	if err != nil {
		return err
	}
	interrupted := ctx
	ctx, cancel := context.WithTimeout(ctx, federationDemoTimeout)
	defer cancel()
	p := progress{began: time.Now()}
	p.step("starting the lab: two clusters (prod and dr), each a public location and one behind NAT, joined only by the WAN")
	l, err := lab.Start(ctx, federationSpec(), labOptions(logger)...)
	if err != nil {
		return errStep("start the lab", err)
	}
	defer func() {
		switch {
		case err != nil && interrupted.Err() != nil:
			fmt.Fprintf(os.Stderr, "\nkilofed-lab demo interrupted (%v)\n", err)
		case err != nil:
			fmt.Fprintf(os.Stderr, "\nkilofed-lab demo failed: %v\nwhat the clusters showed:\n", err)
			dctx, dcancel := context.WithTimeout(context.Background(), 30*time.Second)
			for _, c := range l.Clusters() {
				fmt.Fprintf(os.Stderr, "\n---- cluster %s ----\n%s", c.Name, c.DescribeRelease(dctx, releaseNamespace))
			}
			dcancel()
			fmt.Fprintf(os.Stderr, "\n---- the lab's processes ----\n%s\n", l.LogTails(10))
		}
		p.step("tearing the lab down (%s)", l.Dir)
		closed := time.Now()
		err = errors.Join(err, l.Close())
		fmt.Printf("torn down in %.1fs\n", time.Since(closed).Seconds())
	}()
	kubeconfig, err := l.Kubeconfig()
	if err != nil {
		return errStep("write the kubeconfig", err)
	}
	prod, dr := l.Cluster("prod"), l.Cluster("dr")
	p.step("lab up (folder %s)\n\n%s", l.Dir, l.Describe())

	if err := federate(ctx, l, bins, p); err != nil {
		return err
	}

	const ns = "default"
	p.step("dr runs an echo Deployment and Service on dr-dc-1 (rbx-dc, behind NAT); prod a client pod on prod-dc-1 (lyon-dc, behind NAT)")
	if _, err := dr.Client().AppsV1().Deployments(ns).Create(ctx, lab.EchoDeployment(ns, "echo", "dr-dc-1", 1), metav1.CreateOptions{}); err != nil {
		return errStep("create dr's echo Deployment", err)
	}
	if _, err := dr.Client().CoreV1().Services(ns).Create(ctx, lab.EchoService(ns, "echo", "echo", 80), metav1.CreateOptions{}); err != nil {
		return errStep("create dr's echo Service", err)
	}
	if _, err := prod.Client().CoreV1().Pods(ns).Create(ctx, lab.SleepPod(ns, "client", "prod-dc-1"), metav1.CreateOptions{}); err != nil {
		return errStep("create prod's client pod", err)
	}
	echo, err := dr.WaitPods(ctx, ns, "app=echo", 1)
	if err != nil {
		return errStep("wait for dr's echo pod", err)
	}
	if _, err := prod.WaitPods(ctx, ns, "app=client", 1); err != nil {
		return errStep("wait for prod's client pod", err)
	}
	podURL := "http://" + net.JoinHostPort(echo[0].Status.PodIP, fmt.Sprint(lab.EchoPort)) + "/"
	p.step("before the join: prod's pod client GET %s (dr's pod %s)", podURL, echo[0].Name)
	if out, err := l.PodExec(ctx, "prod", ns, "client", l.LabBinary(), "workload", "get", "--timeout", "2s", podURL); err == nil {
		return fmt.Errorf("prod's client reached dr's pod before the join (%q): the lab routes between clusters by itself, so the demo proves nothing", out)
	}
	fmt.Println("no answer: nothing routes between the clusters")

	p.step("$ kilofed --context prod join dr")
	join := exec.CommandContext(ctx, bins["kilofed"], "--kubeconfig", kubeconfig, "--context", "prod", "join", "dr", "--wait=2m")
	join.Stdout, join.Stderr = os.Stdout, os.Stdout
	if err := join.Run(); err != nil {
		return errStep("kilofed join", err)
	}

	exportFile := filepath.Join(l.Dir, "export-echo.yaml")
	if err := os.WriteFile(exportFile, []byte(exportYAML), 0o644); err != nil {
		return err
	}
	p.step("$ kubectl --context dr apply -f - <<EOF\n%sEOF", exportYAML)
	if out, err := dr.Kubectl(ctx, "apply", "-f", exportFile); err != nil {
		return errStep("export dr's echo Service", fmt.Errorf("%w\n%s", err, out))
	}
	var importIP string
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(300 * time.Millisecond) {
		out, err := prod.Kubectl(ctx, "get", "serviceimports.multicluster.x-k8s.io", "-n", ns, "echo", "-o", "jsonpath={.spec.ips[0]}")
		if err == nil && strings.TrimSpace(string(out)) != "" {
			importIP = strings.TrimSpace(string(out))
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
	kubeDNS := netip.AddrPortFrom(prod.ClusterDNS, 53)
	p.step("prod's pod client asks kube-dns (%s) for %s A: CoreDNS forwards clusterset.local to kilofed-dns (%s)", kubeDNS, name, netip.AddrPortFrom(dnsServiceIP(prod), 53))
	answer, err := resolveUntil(ctx, prod, ns, "client", kubeDNS, name, 60*time.Second)
	if err != nil {
		return errStep("resolve "+name+" from prod", err)
	}
	fmt.Printf(";; ANSWER SECTION:\n%s\n", strings.Join(answer, "\n"))
	if !strings.Contains(strings.Join(answer, "\n"), importIP) {
		return errStep("resolve "+name+" from prod", fmt.Errorf("the answer holds no %s (the ServiceImport's IP)", importIP))
	}

	url := "http://" + name + "/"
	p.step("prod's pod client GET %s (%s: kube-proxy on prod-dc-1, WireGuard through both clusters' gateways)", url, importIP)
	got, err := getUntil(ctx, l, "prod", ns, "client", url, 60*time.Second)
	if err != nil {
		return errStep("GET "+url+" from prod", err)
	}
	fmt.Printf("answered from the other cluster (pod cluster node): %s\n", got)

	p.step("$ kilofed --context prod graph   # prod's mesh as its agents compute it, dr's gateways as Peers")
	if err := showTopology(ctx, bins["kilofed"], kubeconfig, *svg); err != nil {
		return errStep("topology graph", err)
	}

	p.step("$ kilofed --context prod status")
	status := exec.CommandContext(ctx, bins["kilofed"], "--kubeconfig", kubeconfig, "--context", "prod", "status")
	status.Stdout, status.Stderr = os.Stdout, os.Stdout
	if err := status.Run(); err != nil {
		return errStep("kilofed status", err)
	}

	p.step("done; where to look next")
	fmt.Printf("kubeconfig of both clusters: %s (contexts prod, dr), removed at teardown\n", kubeconfig)
	fmt.Printf("  kubectl --kubeconfig %s --context prod -n %s get pods -o wide\n", kubeconfig, releaseNamespace)
	fmt.Printf("  kubectl --kubeconfig %s --context prod -n %s logs -l app.kubernetes.io/name=kilofed-controller --tail 50\n", kubeconfig, releaseNamespace)
	fmt.Println("to keep such a federation running: sudo bin/kilofed-lab up --federation   (Ctrl-C tears it down)")
	fmt.Println("a lab of your own: sudo bin/kilofed-lab up -clusters 2 --kg bin/kg")
	return nil
}

// dnsServiceIP is the ClusterIP the demo gives the chart's kilofed-dns
// Service (CoreDNS forwards to an IP): .53 of the cluster's Service range.
func dnsServiceIP(c *lab.Cluster) netip.Addr {
	a := c.ServiceCIDR.Masked().Addr().As4()
	a[3] = 53
	return netip.AddrFrom4(a)
}

// chartValues are the values the demo installs the chart with in c: c's
// WireGuard range, the demo's mesh options (the same as the per-process
// agents'), and kilofed-dns at dnsServiceIP.
func chartValues(c *lab.Cluster) []string {
	return []string{
		"mesh.subnet=" + c.WireGuardSubnet.String(),
		"mesh.granularity=" + meshOptions.Granularity,
		"agent.encapsulate=" + meshOptions.Encapsulate,
		"dns.clusterIP=" + dnsServiceIP(c).String(),
	}
}

// federate installs kilofed in every cluster of l with its Helm chart (the
// real helm CLI, in parallel), points each cluster's CoreDNS at the
// chart's kilofed-dns Service for clusterset.local, and waits for each
// mesh's leaders. The kubelet stand-ins run kg and kilofed-controller from
// bins for the chart's images. It does not join the clusters.
func federate(ctx context.Context, l *lab.Lab, bins map[string]string, p progress) error {
	chart, err := lab.ChartDir()
	if err != nil {
		return fmt.Errorf("run kilofed-lab from the kilofed repository (it installs charts/kilofed from there): %w", err)
	}
	rel, _ := filepath.Rel(mustGetwd(), chart)
	for _, c := range l.Clusters() {
		argv := []string{"helm", "--kube-context", c.Name, "install", "kilofed", cmpOr(rel, chart), "--namespace", releaseNamespace, "--wait"}
		for _, v := range chartValues(c) {
			argv = append(argv, "--set", v)
		}
		p.step("$ %s", strings.Join(argv, " "))
	}
	fmt.Printf("(both at once; the kubelet stand-ins run kg and kilofed-controller from %s for the chart's images)\n", filepath.Dir(bins["kg"]))
	errs := make([]error, len(l.Clusters()))
	took := make([]time.Duration, len(l.Clusters()))
	var wg sync.WaitGroup
	for i, c := range l.Clusters() {
		wg.Go(func() {
			began := time.Now()
			h, err := c.Helm("")
			if err != nil {
				errs[i] = err
				return
			}
			args := []string{"install", "kilofed", chart, "--namespace", releaseNamespace, "--wait", "--timeout", "3m"}
			for _, v := range chartValues(c) {
				args = append(args, "--set", v)
			}
			if out, err := h.Run(ctx, args...); err != nil {
				errs[i] = errStep("helm install in "+c.Name, fmt.Errorf("%w\n%s", err, out))
			}
			took[i] = time.Since(began)
		})
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return err
	}
	for i, c := range l.Clusters() {
		fmt.Printf("%s: helm install --wait returned in %.1fs\n", c.Name, took[i].Seconds())
	}
	for _, c := range l.Clusters() {
		args := []string{"-n", releaseNamespace, "get", "pods", "-o", "wide", "-l", "app.kubernetes.io/name in (kilo,kilofed-controller)"}
		out, err := c.Kubectl(ctx, args...)
		if err != nil {
			return errStep("kubectl get pods in "+c.Name, err)
		}
		fmt.Printf("\n$ kubectl --context %s %s\n%s", c.Name, strings.Join(args, " "), out)
	}
	for _, c := range l.Clusters() {
		dns := netip.AddrPortFrom(dnsServiceIP(c), 53)
		p.step("%s's CoreDNS: forward clusterset.local to kilofed-dns (%s), the Corefile block the chart's README shows", c.Name, dns)
		if err := c.SetClusterSetDNS(ctx, dns); err != nil {
			return errStep("point "+c.Name+"'s CoreDNS at kilofed's DNS for clusterset.local", err)
		}
	}
	for _, c := range l.Clusters() {
		p.step("waiting for the mesh of %s: one gateway per location with a WireGuard peer per other location", c.Name)
		leaders, err := waitLeaders(ctx, c, podWG(c, releaseNamespace), 90*time.Second)
		if err != nil {
			return errStep("wait for the mesh of "+c.Name, err)
		}
		var names []string
		for _, n := range leaders {
			names = append(names, n.Name+" ("+n.Location+")")
		}
		fmt.Printf("gateways: %s\n", strings.Join(names, ", "))
	}
	return nil
}

// podWG runs wg in the kilo pod of a node of c (release namespace ns), as
// `kubectl exec` does.
func podWG(c *lab.Cluster, ns string) wgFunc {
	return func(ctx context.Context, n *lab.Node, args ...string) ([]byte, error) {
		list, err := c.Client().CoreV1().Pods(ns).List(ctx, metav1.ListOptions{
			LabelSelector: "app.kubernetes.io/name=kilo", FieldSelector: "spec.nodeName=" + n.Name,
		})
		if err != nil {
			return nil, err
		}
		if len(list.Items) == 0 {
			return nil, fmt.Errorf("no kilo pod on %s", n.Name)
		}
		return c.Kubectl(ctx, append([]string{"-n", ns, "exec", list.Items[0].Name, "--", "wg"}, args...)...)
	}
}

// showTopology prints prod's topology in DOT (`kilofed graph`) and, when
// graphviz is installed, writes it as SVG (`kilofed graph -o svg`) to svg.
func showTopology(ctx context.Context, kilofed, kubeconfig, svg string) error {
	graph := func(extra ...string) ([]byte, error) {
		argv := append([]string{"--kubeconfig", kubeconfig, "--context", "prod", "graph", "--encapsulate", meshOptions.Encapsulate}, extra...)
		cmd := exec.CommandContext(ctx, kilofed, argv...)
		var stderr strings.Builder
		cmd.Stderr = &stderr
		out, err := cmd.Output()
		if err != nil {
			return nil, fmt.Errorf("kilofed %s: %w: %s", strings.Join(argv, " "), err, strings.TrimSpace(stderr.String()))
		}
		return out, nil
	}
	dot, err := graph()
	if err != nil {
		return err
	}
	fmt.Print(strings.TrimRight(string(dot), "\n") + "\n")
	if _, err := exec.LookPath("dot"); err != nil {
		fmt.Println("no SVG: graphviz's dot is not installed (`make deps`, or apt-get install graphviz; then kilofed graph -o svg)")
		return nil
	}
	pic, err := graph("-o", "svg")
	if err != nil {
		return err
	}
	if err := os.WriteFile(svg, pic, 0o644); err != nil {
		return err
	}
	fmt.Printf("$ kilofed --context prod graph -o svg > %s\nSVG: %s (kept after the teardown)\n", svg, svg)
	return nil
}

// federationBinaries finds kg, kilofed and kilofed-controller in dir, or
// next to this executable, and makes the lab's kubelet stand-ins run them
// for kilofed's images (KILOFED_BIN).
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
	if err := os.Setenv("KILOFED_BIN", dir); err != nil {
		return nil, err
	}
	return out, nil
}

func mustGetwd() string {
	wd, _ := os.Getwd()
	return wd
}

func cmpOr(rel, abs string) string {
	if rel == "" || strings.HasPrefix(rel, "..") {
		return abs
	}
	return rel
}
