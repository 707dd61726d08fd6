package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"time"

	"github.com/kilofed/kilofed/e2e/lab"
)

// up starts a lab and keeps it until ctx ends (Ctrl-C); with --kg, it runs
// the kg agent on every node.
func up(ctx context.Context, logger *slog.Logger, args []string) error {
	fs := flag.NewFlagSet("up", flag.ContinueOnError)
	clusters := fs.Int("clusters", 1, "number of clusters (1 to 5); the first is the seed's cn-beijing/cn-shanghai cluster")
	kubeProxy := fs.Bool("kube-proxy", true, "run kube-proxy on every node")
	coreDNS := fs.Bool("coredns", true, "run CoreDNS as each cluster's DNS (kube-dns ClusterIP .10 of the service CIDR; needs -kube-proxy)")
	podRoutes := fs.Bool("pod-routes", true, "install host-gw pod routes inside each location (default false with --kg: kg routes)")
	kgPath := fs.String("kg", "", "run this kg agent binary on every node (default: no agents)")
	federation := fs.Bool("federation", false, "start the demo's two clusters prod and dr, kilofed installed in each with its Helm chart, joined with kilofed join (what the MCS conformance suite runs against)")
	binFlag := fs.String("bin", "", "with --federation: folder of kg, kilofed and kilofed-controller (default: next to kilofed-lab)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *federation {
		return upFederation(ctx, logger, *binFlag)
	}
	if *clusters < 1 || *clusters > 5 {
		return fmt.Errorf("-clusters %d: give 1 to 5", *clusters)
	}
	routesSet := false
	fs.Visit(func(f *flag.Flag) { routesSet = routesSet || f.Name == "pod-routes" })
	var kg string
	if *kgPath != "" {
		var err error
		if kg, err = locateKG(*kgPath); err != nil {
			return err
		}
		if !routesSet {
			*podRoutes = false
		}
	}
	spec := lab.Spec{PodRoutes: *podRoutes, KubeProxy: *kubeProxy, CoreDNS: *coreDNS && *kubeProxy, Clusters: []lab.ClusterSpec{lab.SeedClusterSpec()}}
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
	defer l.Close()
	fmt.Println(l.Describe())
	if kg != "" {
		for _, c := range l.Clusters() {
			as, err := startMesh(ctx, c, kg)
			if err != nil {
				return fmt.Errorf("cluster %s: %w", c.Name, err)
			}
			leaders, err := waitLeaders(ctx, c, as.wg, 90*time.Second)
			if err != nil {
				return fmt.Errorf("cluster %s: %w%s", c.Name, err, agentTails(as))
			}
			fmt.Printf("cluster %s: kg runs on every node (logs %s/logs/%s-<node>-kg.log); leaders:", c.Name, l.Dir, c.Name)
			for _, n := range leaders {
				fmt.Printf(" %s (%s)", n.Name, n.Location)
			}
			fmt.Println()
		}
	}
	return keepUp(ctx, l)
}

// upFederation starts the federation demo's lab, installs kilofed in
// prod and dr with its Helm chart, joins them, and keeps them until ctx
// ends.
func upFederation(ctx context.Context, logger *slog.Logger, binDir string) error {
	bins, err := federationBinaries(binDir)
	if err != nil {
		return err
	}
	p := progress{began: time.Now()}
	l, err := lab.Start(ctx, federationSpec(), labOptions(logger)...)
	if err != nil {
		return err
	}
	fmt.Println(l.Describe())
	if err := federate(ctx, l, bins, p); err != nil {
		return errors.Join(err, l.Close())
	}
	kubeconfig, err := l.Kubeconfig()
	if err != nil {
		return errors.Join(err, l.Close())
	}
	p.step("$ kilofed --context prod join dr")
	join := exec.CommandContext(ctx, bins["kilofed"], "--kubeconfig", kubeconfig, "--context", "prod", "join", "dr", "--wait=2m")
	join.Stdout, join.Stderr = os.Stdout, os.Stdout
	if err := join.Run(); err != nil {
		return errors.Join(fmt.Errorf("kilofed join: %w", err), l.Close())
	}
	fmt.Printf("kilofed runs from its chart (release kilofed in %s): kubectl --context CLUSTER -n %s logs -l app.kubernetes.io/name=kilo (or =kilofed-controller)\n", releaseNamespace, releaseNamespace)
	fmt.Printf("MCS conformance suite (kubernetes-sigs/mcs-api, folder conformance): go test . -args -kubeconfig=%s -contexts=dr,prod\n", kubeconfig)
	return keepUp(ctx, l)
}

// keepUp prints how to reach the clusters of l, waits for ctx to end and
// tears l down.
func keepUp(ctx context.Context, l *lab.Lab) error {
	for _, c := range l.Clusters() {
		fmt.Printf("export KUBECONFIG=%s   # cluster %s\n", c.Kubeconfig, c.Name)
	}
	merged, err := l.Kubeconfig()
	if err != nil {
		return err
	}
	var contexts []string
	for _, c := range l.Clusters() {
		contexts = append(contexts, c.Name)
	}
	fmt.Printf("kubeconfig of every cluster: %s (contexts: %s)\n", merged, strings.Join(contexts, ", "))
	fmt.Println("\nkilofed-lab: the lab runs; Ctrl-C tears it down")
	<-ctx.Done()
	fmt.Println("\nkilofed-lab: tearing down")
	return l.Close()
}
