package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"net"
	"strconv"
	"strings"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/kilofed/kilofed/e2e/lab"
)

// demo starts the seed's cluster, serves an HTTP echo Deployment behind a
// Service, and shows a pod on another node reaching it through the
// Service's ClusterIP.
func demo(ctx context.Context, logger *slog.Logger) (err error) {
	began := time.Now()
	l, err := lab.Start(ctx, lab.Spec{
		Clusters:  []lab.ClusterSpec{lab.SeedClusterSpec()},
		PodRoutes: true,
		KubeProxy: true,
	}, labOptions(logger)...)
	if err != nil {
		return err
	}
	defer func() {
		fmt.Println("\n== tearing the lab down")
		err = errors.Join(err, l.Close())
	}()
	fmt.Printf("== lab up in %s\n\n%s\n", time.Since(began).Round(100*time.Millisecond), l.Describe())

	c := l.Clusters()[0]
	const ns = "default"
	client := c.Client()
	if _, err := client.AppsV1().Deployments(ns).Create(ctx, lab.EchoDeployment(ns, "echo", "node-beijing", 2), metav1.CreateOptions{}); err != nil {
		return fmt.Errorf("create deployment: %w", err)
	}
	svc, err := client.CoreV1().Services(ns).Create(ctx, lab.EchoService(ns, "echo", "echo", 80), metav1.CreateOptions{})
	if err != nil {
		return fmt.Errorf("create service: %w", err)
	}
	for _, p := range []struct{ name, node string }{{"client", "node-beijing-2"}, {"client-shanghai", "node-shanghai"}} {
		if _, err := client.CoreV1().Pods(ns).Create(ctx, lab.SleepPod(ns, p.name, p.node), metav1.CreateOptions{}); err != nil {
			return fmt.Errorf("create pod %s: %w", p.name, err)
		}
	}
	wctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	if _, err := c.WaitPods(wctx, ns, "app=echo", 2); err != nil {
		return err
	}
	for _, name := range []string{"client", "client-shanghai"} {
		if _, err := c.WaitPods(wctx, ns, "app="+name, 1); err != nil {
			return err
		}
	}
	if _, err := c.WaitEndpointSlices(wctx, ns, "echo", 2); err != nil {
		return err
	}
	for _, args := range [][]string{
		{"get", "nodes", "-o", "wide"},
		{"get", "pods", "-o", "wide"},
		{"get", "service,endpointslices"},
	} {
		out, err := c.Kubectl(ctx, args...)
		if err != nil {
			return err
		}
		fmt.Printf("\n$ kubectl %s\n%s", strings.Join(args, " "), out)
	}

	url := "http://" + net.JoinHostPort(svc.Spec.ClusterIP, "80") + "/"
	fmt.Printf("\n== from pod client on node-beijing-2: GET %s (the Service's ClusterIP, kube-proxy, host-gw route to node-beijing)\n", url)
	var answer string
	for {
		answer, err = l.PodGet(wctx, c.Name, ns, "client", url)
		if err == nil || wctx.Err() != nil {
			break
		}
		time.Sleep(500 * time.Millisecond)
	}
	if err != nil {
		return fmt.Errorf("GET %s from pod client: %w", url, err)
	}
	fmt.Printf("answer: %s\n", answer)

	fmt.Printf("\n== from pod client-shanghai on node-shanghai (another location): GET %s\n", url)
	out, err := l.PodExec(ctx, c.Name, ns, "client-shanghai", l.LabBinary(), "workload", "get", "--timeout", "3s", url)
	if err != nil {
		fmt.Printf("no answer, as expected without the mesh: nothing routes pods between locations yet (%v)\n", err)
	} else {
		fmt.Printf("answer: %s", out)
	}
	return nil
}

// up starts a lab and keeps it until ctx ends (Ctrl-C).
func up(ctx context.Context, logger *slog.Logger, args []string) error {
	fs := flag.NewFlagSet("up", flag.ContinueOnError)
	clusters := fs.Int("clusters", 1, "number of clusters (1 to 5); the first is the seed's cn-beijing/cn-shanghai cluster")
	kubeProxy := fs.Bool("kube-proxy", true, "run kube-proxy on every node")
	podRoutes := fs.Bool("pod-routes", true, "install host-gw pod routes inside each location")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *clusters < 1 || *clusters > 5 {
		return fmt.Errorf("-clusters %d: give 1 to 5", *clusters)
	}
	spec := lab.Spec{PodRoutes: *podRoutes, KubeProxy: *kubeProxy, Clusters: []lab.ClusterSpec{lab.SeedClusterSpec()}}
	for i := 2; i <= *clusters; i++ {
		spec.Clusters = append(spec.Clusters, lab.ClusterSpec{Locations: []lab.LocationSpec{
			{Name: "public-" + strconv.Itoa(i), Nodes: []lab.NodeSpec{{}, {}}},
			{Name: "behind-nat-" + strconv.Itoa(i), NAT: true, Nodes: []lab.NodeSpec{{}, {}}},
		}})
	}
	l, err := lab.Start(ctx, spec, labOptions(logger)...)
	if err != nil {
		return err
	}
	fmt.Println(l.Describe())
	for _, c := range l.Clusters() {
		fmt.Printf("export KUBECONFIG=%s   # cluster %s\n", c.Kubeconfig, c.Name)
	}
	fmt.Println("\nkilofed-lab: the lab runs; Ctrl-C tears it down")
	<-ctx.Done()
	fmt.Println("\nkilofed-lab: tearing down")
	return l.Close()
}
