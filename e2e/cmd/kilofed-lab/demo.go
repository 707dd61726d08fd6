package main

import (
	"cmp"
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"strings"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/kilofed/kilofed/e2e/lab"
)

// demoTimeout bounds the demo from start-up to the last answer (teardown
// comes on top).
const demoTimeout = 110 * time.Second

// demo starts the seed's cluster (cn-beijing and cn-shanghai), runs the
// real kg agent on every node, shows the nodes, the leaders' WireGuard
// state and the topology graph, then a pod in Beijing reaching a pod in
// Shanghai through WireGuard, directly and through a Service ClusterIP.
func demo(ctx context.Context, logger *slog.Logger, args []string) (err error) {
	fs := flag.NewFlagSet("demo", flag.ContinueOnError)
	kgFlag := fs.String("kg", "", "path of the kg agent (default: kg next to kilofed-lab, else go build ./cmd/kg)")
	svg := fs.String("svg", filepath.Join(os.TempDir(), "kilofed-demo-mesh.svg"), "where to write the topology graph (SVG)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	kg, err := locateKG(*kgFlag)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, demoTimeout)
	defer cancel()
	began := time.Now()
	l, err := lab.Start(ctx, lab.Spec{Clusters: []lab.ClusterSpec{lab.SeedClusterSpec()}, KubeProxy: true}, labOptions(logger)...)
	if err != nil {
		return errStep("start the lab", err)
	}
	var as agents
	defer func() {
		if err != nil && as != nil {
			fmt.Fprintln(os.Stderr, "kilofed-lab demo failed; the agents' last lines:"+agentTails(as))
		}
		fmt.Println("\n== tearing the lab down")
		err = errors.Join(err, l.Close())
	}()
	fmt.Printf("== lab up in %s: the Chinese seed's cluster, two locations joined only by the WAN\n\n%s\n",
		time.Since(began).Round(100*time.Millisecond), l.Describe())

	c := l.Clusters()[0]
	const ns = "default"
	client := c.Client()
	if _, err := client.AppsV1().Deployments(ns).Create(ctx, lab.EchoDeployment(ns, "echo", "node-shanghai", 1), metav1.CreateOptions{}); err != nil {
		return errStep("create the echo Deployment", err)
	}
	svc, err := client.CoreV1().Services(ns).Create(ctx, lab.EchoService(ns, "echo", "echo", 80), metav1.CreateOptions{})
	if err != nil {
		return errStep("create the echo Service", err)
	}
	if _, err := client.CoreV1().Pods(ns).Create(ctx, lab.SleepPod(ns, "client", "node-beijing"), metav1.CreateOptions{}); err != nil {
		return errStep("create the client pod", err)
	}
	if kg == "" {
		if kg, err = buildKG(ctx, l.Dir); err != nil {
			return errStep("build kg", err)
		}
	}
	echoPods, err := c.WaitPods(ctx, ns, "app=echo", 1)
	if err != nil {
		return errStep("wait for the echo pod", err)
	}
	if _, err := c.WaitPods(ctx, ns, "app=client", 1); err != nil {
		return errStep("wait for the client pod", err)
	}
	podURL := "http://" + net.JoinHostPort(echoPods[0].Status.PodIP, fmt.Sprint(lab.EchoPort)) + "/"
	fmt.Printf("== before the agents: pod client (node-beijing) GET %s (pod %s on node-shanghai)\n", podURL, echoPods[0].Name)
	if out, err := l.PodExec(ctx, c.Name, ns, "client", l.LabBinary(), "workload", "get", "--timeout", "2s", podURL); err == nil {
		return fmt.Errorf("pod client reached %s before any agent ran (%q): the lab routes pods between locations by itself, so the demo proves nothing", podURL, out)
	}
	fmt.Println("no answer: nothing routes pod traffic between locations")

	if as, err = startMesh(ctx, c, kg); err != nil {
		return errStep("start the agents", err)
	}
	fmt.Printf("\n== kg (%s) started on every node: --mesh-granularity=%s --encapsulate=%s, embedded WireGuard\n",
		kg, meshOptions.Granularity, meshOptions.Encapsulate)
	leaders, err := waitLeaders(ctx, c, as.wg, 60*time.Second)
	if err != nil {
		return errStep("wait for the mesh", err)
	}
	out, err := c.Kubectl(ctx, "get", "nodes", "-o", "wide")
	if err != nil {
		return errStep("kubectl get nodes", err)
	}
	fmt.Printf("\n$ kubectl get nodes -o wide\n%s", out)
	for _, n := range leaders {
		out, err := as[n.Name].NsEnter(ctx, "wg", "show", lab.AgentLink)
		if err != nil {
			return errStep("wg show on "+n.Name, err)
		}
		fmt.Printf("\n== leader of %s: %s, `wg show %s`\n%s", n.Location, n.Name, lab.AgentLink, out)
	}

	dot, how, err := topologyDOT(ctx, l, c, kg, leaders[0])
	if err != nil {
		return errStep("topology graph", err)
	}
	if err := renderSVG(ctx, dot, *svg); err != nil {
		return errStep("render the graph", err)
	}
	fmt.Printf("\n== topology: %s\n%s\nrendered with dot -Tsvg: %s\n", how, strings.TrimRight(dot, "\n"), *svg)

	fmt.Printf("\n== pod client (node-beijing, cn-beijing) GET %s (pod %s, node-shanghai, cn-shanghai)\n", podURL, echoPods[0].Name)
	answer, err := getUntil(ctx, l, c.Name, ns, "client", podURL, 45*time.Second)
	if err != nil {
		return errStep("GET the Shanghai pod from Beijing", err)
	}
	fmt.Printf("answered across locations through WireGuard: %s\n", answer)

	if _, err := c.WaitEndpointSlices(ctx, ns, "echo", 1); err != nil {
		return errStep("wait for the Service's endpoints", err)
	}
	svcURL := "http://" + net.JoinHostPort(svc.Spec.ClusterIP, "80") + "/"
	fmt.Printf("\n== pod client GET %s (Service echo's ClusterIP: kube-proxy on node-beijing, then WireGuard)\n", svcURL)
	if answer, err = getUntil(ctx, l, c.Name, ns, "client", svcURL, 30*time.Second); err != nil {
		return errStep("GET the Service from Beijing", err)
	}
	fmt.Printf("answered through the Service ClusterIP: %s\n", answer)

	fmt.Println("\n== bytes through the tunnels (wg show kilo0 transfer)")
	keys := peerNames(ctx, as)
	for _, n := range leaders {
		out, err := as[n.Name].NsEnter(ctx, "wg", "show", lab.AgentLink, "transfer")
		if err != nil {
			return errStep("wg show transfer on "+n.Name, err)
		}
		peers := 0
		for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
			if f := strings.Fields(line); len(f) == 3 {
				peers++
				fmt.Printf("%s -> %s: received %s B, sent %s B\n", n.Name, cmp.Or(keys[f[0]], f[0]), f[1], f[2])
			}
		}
		if peers == 0 {
			fmt.Printf("%s: no peers any more: another node of %s took over as leader\n", n.Name, n.Location)
		}
	}
	fmt.Printf("\n== done in %s\n", time.Since(began).Round(100*time.Millisecond))
	return nil
}

// getUntil makes HTTP GETs of url from a pod until one answers or within
// passes, and returns the answer or the last error.
func getUntil(ctx context.Context, l *lab.Lab, cluster, namespace, pod, url string, within time.Duration) (string, error) {
	ctx, cancel := context.WithTimeout(ctx, within)
	defer cancel()
	for {
		out, err := l.PodExec(ctx, cluster, namespace, pod, l.LabBinary(), "workload", "get", "--timeout", "2s", url)
		if err == nil {
			return strings.TrimSpace(string(out)), nil
		}
		select {
		case <-ctx.Done():
			return "", fmt.Errorf("no answer within %s: %w", within, err)
		case <-time.After(300 * time.Millisecond):
		}
	}
}
