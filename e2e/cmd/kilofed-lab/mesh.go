package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"github.com/kilofed/kilofed/e2e/lab"
)

// peerCRD is the Peer CRD's file in the repository; kg refuses to start
// without it.
var peerCRD = filepath.Join("mesh", "config", "crd", "kilo.squat.ai_peers.yaml")

// meshOptions are how the demo and `up --kg` run the agents.
var meshOptions = lab.AgentOptions{Granularity: "location", Encapsulate: "never", Extra: []string{"--serve-graph"}} // /graph: topologyDOT's fallback

// locateKG returns the kg binary: flagPath if given (an error if it does
// not exist), else kg next to this executable, else "" (see buildKG).
func locateKG(flagPath string) (string, error) {
	if flagPath != "" {
		abs, err := filepath.Abs(flagPath)
		if err == nil {
			_, err = os.Stat(abs)
		}
		if err != nil {
			return "", fmt.Errorf("--kg %s: %w: build it with `go build -o bin/ ./cmd/kg` (or `make build`)", flagPath, err)
		}
		return abs, nil
	}
	if exe, err := os.Executable(); err == nil {
		if p := filepath.Join(filepath.Dir(exe), "kg"); isExecutable(p) {
			return p, nil
		}
	}
	return "", nil
}

// buildKG builds kg with go build ./cmd/kg into dir.
func buildKG(ctx context.Context, dir string) (string, error) {
	root, err := lab.RepoRoot()
	if err != nil {
		return "", fmt.Errorf("no kg next to kilofed-lab and no repository to build it from (%w): give --kg PATH", err)
	}
	out := filepath.Join(dir, "kg")
	cmd := exec.CommandContext(ctx, "go", "build", "-o", out, "./cmd/kg")
	cmd.Dir = root
	if b, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("go build ./cmd/kg: %w\n%s", err, b)
	}
	return out, nil
}

// findNextTo returns the first executable named name in the folders of
// paths, or "".
func findNextTo(name string, paths ...string) string {
	for _, p := range paths {
		if c := filepath.Join(filepath.Dir(p), name); isExecutable(c) {
			return c
		}
	}
	return ""
}

func isExecutable(path string) bool {
	st, err := os.Stat(path)
	return err == nil && !st.IsDir() && st.Mode()&0o111 != 0
}

// findPeerCRD returns the Peer CRD file: in the repository above the
// working directory, or above the kg binary's folder.
func findPeerCRD(kg string) (string, error) {
	var tried []string
	if root, err := lab.RepoRoot(); err == nil {
		tried = append(tried, filepath.Join(root, peerCRD))
	}
	tried = append(tried, filepath.Join(filepath.Dir(kg), "..", peerCRD))
	for _, p := range tried {
		if _, err := os.Stat(p); err == nil {
			return p, nil
		}
	}
	return "", fmt.Errorf("the Peer CRD (%s) is not in %s: run kilofed-lab from the kilofed repository", peerCRD, strings.Join(tried, " nor "))
}

// agents are the kg processes of a cluster, by node name.
type agents map[string]*lab.Process

// startMesh installs the Peer CRD in c and runs kg on every node of c.
func startMesh(ctx context.Context, c *lab.Cluster, kg string) (agents, error) {
	crd, err := findPeerCRD(kg)
	if err != nil {
		return nil, err
	}
	if out, err := c.Kubectl(ctx, "apply", "-f", crd); err != nil {
		return nil, fmt.Errorf("install the Peer CRD: %w\n%s", err, out)
	}
	if out, err := c.Kubectl(ctx, "wait", "--for=condition=Established", "--timeout=30s", "crd/peers.kilo.squat.ai"); err != nil {
		return nil, fmt.Errorf("the Peer CRD is not established: %w\n%s", err, out)
	}
	as := agents{}
	o := meshOptions
	o.Binary = kg
	for _, n := range c.Nodes() {
		p, err := n.StartAgent(o)
		if err != nil {
			return nil, fmt.Errorf("start kg on %s: %w", n.Name, err)
		}
		as[n.Name] = p
	}
	return as, nil
}

// leaderSettle is how long the leaders must stay the same before
// waitLeaders trusts them: longer than kg's --lease-duration (3 s), since a
// node whose heartbeat lease turns fresh late may take over.
const leaderSettle = 4 * time.Second

// wgFunc runs `wg ARGS...` where node n's agent runs.
type wgFunc func(ctx context.Context, n *lab.Node, args ...string) ([]byte, error)

// errAgentGone is returned by a wgFunc whose agent has exited: waiting
// longer is pointless.
var errAgentGone = errors.New("the agent exited")

// wg runs wg in the namespaces of the agent process of n.
func (as agents) wg(ctx context.Context, n *lab.Node, args ...string) ([]byte, error) {
	p := as[n.Name]
	if p.Exited() {
		return nil, fmt.Errorf("%w: kg on %s: %v\n--- last lines of %s ---\n%s", errAgentGone, n.Name, p.Err(), p.LogPath, p.Tail(20))
	}
	return p.NsEnter(ctx, append([]string{"wg"}, args...)...)
}

// waitLeaders waits until each location of c has exactly one node whose
// kilo0 has WireGuard peers (one per other location), the same ones for
// leaderSettle, and returns them in location order. wg runs wg where each
// node's agent runs.
func waitLeaders(ctx context.Context, c *lab.Cluster, wg wgFunc, within time.Duration) ([]*lab.Node, error) {
	ctx, cancel := context.WithTimeout(ctx, within)
	defer cancel()
	want := len(c.Locations()) - 1
	var prev string
	var since time.Time
	for {
		var leaders []*lab.Node
		var names, problems []string
		for _, loc := range c.Locations() {
			var found []string
			for _, n := range loc.Nodes() {
				out, err := wg(ctx, n, "show", lab.AgentLink, "peers")
				if errors.Is(err, errAgentGone) {
					return nil, err
				}
				if err == nil && want > 0 && len(strings.Fields(string(out))) == want {
					found = append(found, n.Name)
					leaders = append(leaders, n)
				}
			}
			names = append(names, found...)
			if len(found) != 1 {
				problems = append(problems, fmt.Sprintf("location %s has %d nodes with %d WireGuard peers (%s)",
					loc.Name, len(found), want, strings.Join(found, ", ")))
			}
		}
		now := strings.Join(names, ",")
		if len(problems) > 0 || now != prev {
			prev, since = now, time.Now()
		} else if time.Since(since) >= leaderSettle {
			return leaders, nil
		}
		if len(problems) == 0 {
			problems = append(problems, "leaders "+now+" not settled yet")
		}
		select {
		case <-ctx.Done():
			return nil, fmt.Errorf("the mesh did not form within %s: %s", within, strings.Join(problems, "; "))
		case <-time.After(300 * time.Millisecond):
		}
	}
}

// peerNames maps the agents' WireGuard public keys to their node names.
func peerNames(ctx context.Context, as agents) map[string]string {
	names := map[string]string{}
	for n, p := range as {
		if out, err := p.NsEnter(ctx, "wg", "show", lab.AgentLink, "public-key"); err == nil {
			names[strings.TrimSpace(string(out))] = n
		}
	}
	return names
}

// topologyDOT returns the mesh's graph in DOT and the command that drew it:
// `kilofed graph` when kilofed is found next to kg or kilofed-lab, else
// kg's own /graph, asked from inside the leader's namespace.
func topologyDOT(ctx context.Context, l *lab.Lab, c *lab.Cluster, kg string, leader *lab.Node) (string, string, error) {
	exe, _ := os.Executable()
	if kilofed := findNextTo("kilofed", kg, exe); kilofed != "" {
		argv := []string{kilofed, "graph", "--kubeconfig", c.Kubeconfig, "--encapsulate", meshOptions.Encapsulate}
		cmd := exec.CommandContext(ctx, argv[0], argv[1:]...)
		var stderr strings.Builder
		cmd.Stderr = &stderr
		out, err := cmd.Output()
		if err != nil {
			return "", "", fmt.Errorf("%s: %w: %s", strings.Join(argv, " "), err, strings.TrimSpace(stderr.String()))
		}
		return string(out), "kilofed graph --kubeconfig " + c.Kubeconfig, nil
	}
	url := fmt.Sprintf("http://127.0.0.1:%d/graph", lab.AgentHTTPPort)
	out, err := leader.Exec(ctx, l.LabBinary(), "workload", "get", url)
	if err != nil {
		return "", "", fmt.Errorf("GET %s in %s (kilofed not built: no bin/kilofed): %w", url, leader.Netns, err)
	}
	return string(out), "GET " + url + " in " + leader.Netns + " (kg's view; bin/kilofed not found)", nil
}

// renderSVG draws dot into path with Graphviz.
func renderSVG(ctx context.Context, dot, path string) error {
	if _, err := exec.LookPath("dot"); err != nil {
		return fmt.Errorf("graphviz's dot is missing (%w): run `make deps` or apt-get install graphviz", err)
	}
	cmd := exec.CommandContext(ctx, "dot", "-Tsvg", "-o", path)
	cmd.Stdin = strings.NewReader(dot)
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("dot -Tsvg -o %s: %w\n%s", path, err, out)
	}
	return nil
}

// agentTails returns the last lines of every agent's log, for an error.
func agentTails(as agents) string {
	names := make([]string, 0, len(as))
	for n := range as {
		names = append(names, n)
	}
	sort.Strings(names)
	var b strings.Builder
	for _, n := range names {
		fmt.Fprintf(&b, "\n--- kg on %s (%s) ---\n%s\n", n, as[n].LogPath, as[n].Tail(15))
	}
	return b.String()
}

// errStep wraps a failed demo step's error with the step's name.
func errStep(step string, err error) error {
	if err == nil {
		return nil
	}
	return fmt.Errorf("%s: %w", step, err)
}
