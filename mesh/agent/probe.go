package agent

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"

	"github.com/kilofed/kilofed/mesh/topology"
)

// RunLeadership runs RunElection when Config.Election is set, else
// RunHeartbeat.
func (a *Agent) RunLeadership(ctx context.Context) error {
	if a.cfg.Election != nil {
		return a.RunElection(ctx)
	}
	return a.RunHeartbeat(ctx)
}

// Forwarding returns nil when this node can forward (Config.Forwarding)
// and its tunnels did not fail the last time it led (Config.TunnelProbe),
// the reasons otherwise: what /forwarding answers the standbys' probes.
func (a *Agent) Forwarding() error {
	var err error
	if f := a.cfg.Forwarding; f != nil {
		err = f()
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	return errors.Join(err, a.tunnelErr)
}

// HTTPProbe returns a Config.Probe that asks the leader's agent, at its
// internal IP and the given port (kg's --listen), whether it can forward
// (GET /forwarding): an error when it does not answer 200 in time.
func HTTPProbe(port int) func(ctx context.Context, leader topology.Node) error {
	client := &http.Client{Transport: &http.Transport{Proxy: nil, DialContext: dialWithin(&net.Dialer{}), MaxIdleConnsPerHost: 1}}
	return func(ctx context.Context, leader topology.Node) error {
		ip := leader.InternalIP.Addr()
		if !ip.IsValid() {
			ip = leader.InternalIP6.Addr()
		}
		if !ip.IsValid() {
			return fmt.Errorf("probe %s: no internal IP", leader.Name)
		}
		req, err := probeRequest(ctx, "http://"+net.JoinHostPort(ip.String(), strconv.Itoa(port))+"/forwarding")
		if err != nil {
			return err
		}
		resp, err := client.Do(req)
		if err != nil {
			return fmt.Errorf("probe %s: %w", leader.Name, err)
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(io.LimitReader(resp.Body, 512))
		if resp.StatusCode != http.StatusOK {
			return fmt.Errorf("probe %s: %s: %s", leader.Name, resp.Status, body)
		}
		return nil
	}
}

// probeCtxKey carries a probe's own context to the dial of its connection.
type probeCtxKey struct{}

// probeRequest returns a GET of url for a probe that gives up with ctx, to
// be sent by a client that dials with dialWithin.
func probeRequest(ctx context.Context, url string) (*http.Request, error) {
	return http.NewRequestWithContext(context.WithValue(ctx, probeCtxKey{}, ctx), http.MethodGet, url, nil)
}

// dialWithin returns a DialContext for an http.Transport that dials with d
// until the probe that asked for the connection (probeRequest) gives up.
// The Transport itself lets a dial go on after its request was canceled,
// for a later request, and toward a peer that is gone the kernel retries
// the SYN for about 2 minutes (net.ipv4.tcp_syn_retries): a probe of every
// 200 ms would pile those up over a cut LAN, and through a tunnel without
// a session each retry waits in wireguard-go's queue for the peer (a 64 KiB
// buffer) and restarts its handshake attempts, so that the queue of a lost
// location never empties.
func dialWithin(d *net.Dialer) func(ctx context.Context, network, addr string) (net.Conn, error) {
	return func(ctx context.Context, network, addr string) (net.Conn, error) {
		if probe, ok := ctx.Value(probeCtxKey{}).(context.Context); ok {
			ctx = probe
		}
		return d.DialContext(ctx, network, addr)
	}
}
