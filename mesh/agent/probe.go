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
	client := &http.Client{Transport: &http.Transport{Proxy: nil, MaxIdleConnsPerHost: 1}}
	return func(ctx context.Context, leader topology.Node) error {
		ip := leader.InternalIP.Addr()
		if !ip.IsValid() {
			ip = leader.InternalIP6.Addr()
		}
		if !ip.IsValid() {
			return fmt.Errorf("probe %s: no internal IP", leader.Name)
		}
		url := "http://" + net.JoinHostPort(ip.String(), strconv.Itoa(port)) + "/forwarding"
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
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
