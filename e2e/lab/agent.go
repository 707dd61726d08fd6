package lab

import (
	"errors"
	"path/filepath"
	"strings"
)

// AgentOptions says how Node.StartAgent runs the kg agent.
type AgentOptions struct {
	// Binary is the path of the kg binary (required).
	Binary string
	// Granularity is kg's --mesh-granularity (default "location").
	Granularity string
	// Encapsulate is kg's --encapsulate (default "never": the lab's LANs
	// are flat, so nodes of a location route to each other directly).
	Encapsulate string
	// Extra are more kg flags, added last.
	Extra []string
}

// AgentLink is the WireGuard device kg creates on each node.
const AgentLink = "kilo0"

// AgentHTTPPort is the port of kg's HTTP server (/metrics, /health; /graph
// with --serve-graph) on every interface of its node.
const AgentHTTPPort = 1107

// agentScript returns the sh -c script that runs kg on node n with the
// given kubeconfig: a private tmpfs on /run/wireguard (in the mount
// namespace `ip netns exec` gives it), so that every node's embedded
// WireGuard can be called kilo0 as in production, then exec kg.
func (n *Node) agentScript(o AgentOptions, kubeconfig string) (string, error) {
	if o.Binary == "" {
		return "", errors.New("AgentOptions.Binary is empty: give the path of kg (go build ./cmd/kg)")
	}
	if o.Granularity == "" {
		o.Granularity = "location"
	}
	if o.Encapsulate == "" {
		o.Encapsulate = "never"
	}
	c := n.cluster
	args := []string{
		o.Binary,
		"--kubeconfig=" + kubeconfig,
		"--hostname=" + n.Name,
		"--subnet=" + c.WireGuardSubnet.String(),
		"--mesh-granularity=" + o.Granularity,
		"--encapsulate=" + o.Encapsulate,
		"--wireguard=userspace",
		"--key-file=" + filepath.Join(n.lab.Dir, "keys", c.Name+"-"+n.Name, "key"),
	}
	args = append(args, o.Extra...)
	return "mkdir -p /run/wireguard && mount -t tmpfs kfl-wg /run/wireguard && exec " + shellJoin(args), nil
}

// shellJoin quotes args for sh.
func shellJoin(args []string) string {
	q := make([]string, len(args))
	for i, a := range args {
		q[i] = "'" + strings.ReplaceAll(a, "'", `'\''`) + "'"
	}
	return strings.Join(q, " ")
}
