//go:build linux

package lab

import (
	"context"
	"fmt"
	"os/exec"
	"strconv"
	"strings"
	"time"
)

// StartAgent runs the real kg agent on the node (see AgentOptions), with a
// private /run/wireguard so that its embedded WireGuard device is kilo0
// (AgentLink), its key in Dir/keys/<cluster>-<node>/, and its output in
// Dir/logs/<cluster>-<node>-kg.log. It authenticates as a real agent pod
// does: the cluster gets the mesh's manifests first (Cluster.InstallMesh),
// and kg a token bound to its node (Node.AgentKubeconfig), so that it may
// write only its own node's state. Inspect its device with
// Process.NsEnter(ctx, "wg", "show", AgentLink). Close stops it (kg
// removes its routes and rules on SIGTERM).
func (n *Node) StartAgent(o AgentOptions) (*Process, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	if err := n.cluster.InstallMesh(ctx); err != nil {
		return nil, err
	}
	kubeconfig, err := n.AgentKubeconfig(ctx)
	if err != nil {
		return nil, err
	}
	script, err := n.agentScript(o, kubeconfig)
	if err != nil {
		return nil, err
	}
	return n.Start("kg", "sh", "-c", script)
}

// NsEnter runs argv in the mount and network namespaces of the running
// process (nsenter -t <pid> -m -n), where an agent's private
// /run/wireguard is visible, and returns its standard output.
func (p *Process) NsEnter(ctx context.Context, argv ...string) ([]byte, error) {
	if p.Exited() {
		return nil, fmt.Errorf("%s exited (%v): nothing to enter%s", p.Name, p.Err(), p.logTail())
	}
	full := append([]string{"-t", strconv.Itoa(p.pid), "-m", "-n"}, argv...)
	cmd := exec.CommandContext(ctx, "nsenter", full...)
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return out, fmt.Errorf("%s in the namespaces of %s: %w: %s", strings.Join(argv, " "), p.Name, err, strings.TrimSpace(stderr.String()))
	}
	return out, nil
}
