//go:build linux

package mesh

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/kilofed/kilofed/e2e/lab"
)

// metaCloud is the French seed's meta-cloud in one cluster: three
// locations of two nodes; the third ("lyon-dc", on premises) sits behind
// NAT, so its nodes keep their mappings open with persistent keepalives.
func metaCloud() lab.Spec {
	keepalive := map[string]string{"kilo.squat.ai/persistent-keepalive": "10"}
	return lab.Spec{Clusters: []lab.ClusterSpec{{
		Name: "meta",
		Locations: []lab.LocationSpec{
			{Name: "scaleway-paris", Nodes: []lab.NodeSpec{{Name: "scw-1"}, {Name: "scw-2"}}},
			{Name: "aws-euwest3", Nodes: []lab.NodeSpec{{Name: "aws-1"}, {Name: "aws-2"}}},
			{Name: "lyon-dc", NAT: true, Nodes: []lab.NodeSpec{{Name: "dc-1", Annotations: keepalive}, {Name: "dc-2", Annotations: keepalive}}},
		},
	}}}
}

func TestMeshPodsReachEveryLocation(t *testing.T) {
	l := lab.StartT(t, metaCloud())
	ctx, cancel := context.WithTimeout(context.Background(), 8*time.Minute)
	defer cancel()
	c := l.Cluster("meta")
	installCRD(ctx, t, c)
	ips := echoPods(ctx, t, c)

	for _, mode := range []meshOptions{
		{granularity: "location", encapsulate: "never"},
		{granularity: "full", encapsulate: "never"},
		{granularity: "location", encapsulate: "always"},
	} {
		t.Run(mode.granularity+"-encapsulate-"+mode.encapsulate, func(t *testing.T) {
			as := startMesh(t, c, mode)
			checkAllPairs(ctx, t, l, c, ips, 60*time.Second)
			if t.Failed() {
				return
			}
			// Every location's leader (or, in full mode, every node)
			// has handshaken with its WireGuard peers.
			for name, p := range as {
				out, err := wg(ctx, p, "show", "kilo0", "latest-handshakes")
				if err != nil {
					t.Errorf("wg show on %s: %v\n%s", name, err, out)
					continue
				}
				for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
					if f := strings.Fields(line); len(f) == 2 && f[1] == "0" {
						t.Errorf("%s: peer %s never handshaken:\n%s", name, f[0], out)
					}
				}
			}
			// Stop the agents: the next mode starts from what clean-up left.
			for name, p := range as {
				if err := p.Stop(); err != nil {
					t.Errorf("stop kg on %s: %v", name, err)
				}
			}
		})
	}
}
