// Command kilofed-lab runs the kilofed lab: real Kubernetes clusters and a
// real network on one Linux machine (see package
// github.com/kilofed/kilofed/e2e/lab).
//
//	kilofed-lab demo [--bin DIR] [--svg PATH]
//	                             a federation: two clusters (a public location and one
//	                             behind NAT each), kilofed installed in each with its Helm
//	                             chart (the real helm CLI; kg and kilofed-controller run
//	                             from the chart's images), CoreDNS forwarding
//	                             clusterset.local to the chart's kilofed-dns, `kilofed
//	                             join`, dr's echo Service exported, a pod of prod resolving
//	                             echo.default.svc.clusterset.local and answered by dr's
//	                             pod; prod's topology (DOT, SVG), `kilofed status`; then
//	                             teardown (also on failure and Ctrl-C)
//	kilofed-lab demo-mesh [--kg PATH] [--svg PATH]
//	                             the seed's cluster across two locations (cn-beijing,
//	                             cn-shanghai), the real kg agent on every node: nodes,
//	                             the leaders' WireGuard, the topology graph (SVG), a pod
//	                             in Beijing answered by a pod in Shanghai, directly and
//	                             through a Service ClusterIP; then teardown
//	kilofed-lab up [-clusters N] [--kg PATH]
//	                             start a lab (with kg on every node when --kg is given)
//	                             and keep it until Ctrl-C, printing the kubeconfig paths
//	                             (one per cluster, and one with a context per cluster);
//	                             each cluster runs CoreDNS unless -coredns=false
//	kilofed-lab up --federation [--bin DIR]
//	                             start the demo's clusters prod and dr, kilofed installed
//	                             in each with its Helm chart, join them, keep them
//	kilofed-lab clean            remove the leftovers of crashed runs (kfl-* namespaces,
//	                             links, processes, temp dirs); refuses while a lab runs
//	kilofed-lab workload ...     the pod workloads (HTTP/UDP echo, sleep, get, udp-send)
//	                             that the kubelet stand-in runs in pod namespaces
//
// It needs root; the control-plane binaries come from $KILOFED_LAB_BINS or
// `make lab-bins`.
package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"syscall"

	"github.com/kilofed/kilofed/e2e/lab"
	"github.com/kilofed/kilofed/e2e/workload"
)

const usage = `usage: kilofed-lab <command>
  demo [--bin DIR] [--svg PATH]
                   a federation of two clusters, kilofed installed in each with its Helm
                   chart, joined with kilofed join, a Service exported from one, answered
                   in the other by its clusterset.local name; torn down on exit
  demo-mesh [--kg PATH] [--svg PATH]
                   start the seed's two-location cluster with kg on every node, show the
                   mesh and a pod answered across locations through WireGuard, tear down
  up [-clusters N] [-kube-proxy=false] [-coredns=false] [-pod-routes=false] [--kg PATH]
                   start a lab (kg on every node with --kg) and keep it until Ctrl-C
  up --federation [--bin DIR]
                   prod and dr, kilofed installed with its chart and joined (as the demo,
                   without the export), kept
                   until Ctrl-C: the lab the MCS conformance suite runs against
  clean            remove the leftovers of crashed lab runs
  workload ...     run a pod workload (used by the lab's kubelet stand-in)`

func main() {
	if len(os.Args) < 2 {
		fmt.Fprintln(os.Stderr, usage)
		os.Exit(2)
	}
	if os.Args[1] == "workload" {
		if err := workload.Main(os.Args[2:]); err != nil {
			fmt.Fprintln(os.Stderr, "kilofed-lab workload:", err)
			if errors.Is(err, workload.ErrUsage) {
				os.Exit(2)
			}
			os.Exit(1)
		}
		return
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	logger := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelInfo}))
	var err error
	switch os.Args[1] {
	case "demo":
		err = federationDemo(ctx, logger, os.Args[2:])
	case "demo-mesh":
		err = demo(ctx, logger, os.Args[2:])
	case "up":
		err = up(ctx, logger, os.Args[2:])
	case "clean":
		err = lab.Sweep(ctx)
		if err == nil {
			fmt.Println("kilofed-lab: no lab leftovers remain")
		}
	case "help", "-h", "--help":
		fmt.Println(usage)
	default:
		fmt.Fprintf(os.Stderr, "kilofed-lab: unknown command %q\n%s\n", os.Args[1], usage)
		os.Exit(2)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "kilofed-lab:", err)
		os.Exit(1)
	}
}

// labOptions are the options every command starts its lab with: its own
// executable runs the pod workloads.
func labOptions(logger *slog.Logger) []lab.Option {
	opts := []lab.Option{lab.WithLogger(logger)}
	if exe, err := os.Executable(); err == nil {
		opts = append(opts, lab.WithLabBinary(exe))
	}
	return opts
}
