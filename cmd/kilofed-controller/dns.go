package main

import (
	"context"
	"flag"
	"fmt"
	"log/slog"
	"net"
	"strings"

	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	mcsclient "sigs.k8s.io/mcs-api/pkg/client/clientset/versioned"

	"github.com/kilofed/kilofed/dns/server"
	"github.com/kilofed/kilofed/dns/watch"
	"github.com/kilofed/kilofed/dns/zone"
)

// dnsFlags registers the flags of the clusterset.local DNS server.
func dnsFlags(fs *flag.FlagSet, o *options) {
	fs.StringVar(&o.dnsListen, "dns-listen", "", "serve clusterset.local DNS on this host:port, UDP and TCP (e.g. :5353); empty: no DNS server")
	fs.StringVar(&o.dnsUpstreams, "dns-upstream", "", "comma-separated resolvers (host or host:port, port 53 by default) that every other name is forwarded to, in order; empty: other names are REFUSED")
}

// upstreams parses --dns-upstream.
func upstreams(s string) ([]string, error) {
	var out []string
	for _, f := range strings.Split(s, ",") {
		if f = strings.TrimSpace(f); f == "" {
			continue
		}
		host, port, err := net.SplitHostPort(f)
		if err != nil {
			host, port = strings.Trim(f, "[]"), "53"
			if strings.Contains(host, ":") && net.ParseIP(host) == nil {
				return nil, fmt.Errorf("--dns-upstream %q: %w", f, err)
			}
		}
		if host == "" || port == "" {
			return nil, fmt.Errorf("--dns-upstream %q: want host or host:port", f)
		}
		out = append(out, net.JoinHostPort(host, port))
	}
	return out, nil
}

// startDNS starts the zone's feed and the DNS server on addr; it returns the
// address served.
func startDNS(ctx context.Context, addr, ups string, kube kubernetes.Interface, mcs mcsclient.Interface,
	reg prometheus.Registerer, log *slog.Logger) (string, error) {
	up, err := upstreams(ups)
	if err != nil {
		return "", err
	}
	log = log.With("component", "dns")
	z := zone.New(zone.Config{})
	feed, err := watch.Start(ctx, watch.Config{Kube: kube, MCS: mcs, Zone: z, Logger: log})
	if err != nil {
		return "", err
	}
	h := server.NewHandler(server.Config{Zone: z, Ready: feed.HasSynced, Upstreams: up,
		Metrics: server.NewMetrics(reg, z.Services), Logger: log})
	srv, err := server.Listen(addr, h)
	if err != nil {
		return "", fmt.Errorf("--dns-listen: %w", err)
	}
	go func() {
		if err := srv.Serve(ctx); err != nil {
			log.Error("dns server", "err", err)
		}
	}()
	log.Info("dns server started", "listen", srv.Addr(), "upstreams", up)
	return srv.Addr(), nil
}

// startDNS starts the DNS server of --dns-listen with clients of cfg. It
// does not wait for the cluster ID: the zone needs none.
func (o options) startDNS(ctx context.Context, cfg *rest.Config, reg prometheus.Registerer, log *slog.Logger) error {
	kube, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return fmt.Errorf("dns: %w", err)
	}
	mcs, err := mcsclient.NewForConfig(cfg)
	if err != nil {
		return fmt.Errorf("dns: %w", err)
	}
	_, err = startDNS(ctx, o.dnsListen, o.dnsUpstreams, kube, mcs, reg, log)
	return err
}
