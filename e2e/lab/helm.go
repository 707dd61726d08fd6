package lab

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
)

// Helm runs the lab's real helm CLI (built by `make lab-bins`) against one
// cluster, with its own config, cache and data folders, as a user installs
// charts/kilofed.
type Helm struct {
	// Bin is the helm binary.
	Bin string
	// Kubeconfig is the cluster's admin kubeconfig.
	Kubeconfig string
	// Home holds helm's config, cache and data folders.
	Home string
}

// Helm returns the lab's helm CLI for c. Its folders go under home, or under
// the lab's folder (removed with the lab) when home is "".
func (c *Cluster) Helm(home string) (*Helm, error) {
	bin := filepath.Join(c.lab.bins, "helm")
	if _, err := os.Stat(bin); err != nil {
		return nil, fmt.Errorf("%w: no helm in %s: run `make lab-bins`", ErrBinaryMissing, c.lab.bins)
	}
	if home == "" {
		home = filepath.Join(c.lab.Dir, c.Name, "helm")
	}
	return &Helm{Bin: bin, Kubeconfig: c.Kubeconfig, Home: home}, nil
}

// Run runs helm with args and returns its combined output.
func (h *Helm) Run(ctx context.Context, args ...string) (string, error) {
	cmd := exec.CommandContext(ctx, h.Bin, append([]string{"--kubeconfig", h.Kubeconfig}, args...)...)
	cmd.Env = append(os.Environ(), "HELM_CACHE_HOME="+h.Home+"/cache", "HELM_CONFIG_HOME="+h.Home+"/config", "HELM_DATA_HOME="+h.Home+"/data")
	out, err := cmd.CombinedOutput()
	return string(out), err
}

// ChartDir returns the folder of the kilofed chart in the repository.
func ChartDir() (string, error) {
	root, err := RepoRoot()
	if err != nil {
		return "", err
	}
	return filepath.Join(root, "charts", "kilofed"), nil
}

// DescribeRelease is what a failed install shows: every pod, the last log
// lines of the release's kg and kilofed-controller pods in namespace ns,
// and the recent events.
func (c *Cluster) DescribeRelease(ctx context.Context, ns string) string {
	var b strings.Builder
	for _, args := range [][]string{
		{"get", "pods", "-A", "-o", "wide"},
		{"-n", ns, "logs", "-l", "app.kubernetes.io/name=kilo", "--tail", "20", "--prefix"},
		{"-n", ns, "logs", "-l", "app.kubernetes.io/name=kilofed-controller", "--tail", "20", "--prefix"},
		{"get", "events", "-A", "--sort-by=.lastTimestamp"},
	} {
		out, _ := c.Kubectl(ctx, args...)
		fmt.Fprintf(&b, "$ kubectl %s\n%s\n", strings.Join(args, " "), out)
	}
	return b.String()
}
