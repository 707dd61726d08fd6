//go:build linux

package mesh

import (
	"context"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/kilofed/kilofed/e2e/lab"
	"github.com/kilofed/kilofed/mesh/k8s"
)

// stickyLab is a location of two nodes, whose leader the test cuts off,
// and another location, so that the leader has WireGuard peers.
func stickyLab() lab.Spec {
	return lab.Spec{Clusters: []lab.ClusterSpec{{
		Name: "sticky",
		Locations: []lab.LocationSpec{
			{Name: "paris", Nodes: []lab.NodeSpec{{Name: "par-1"}, {Name: "par-2"}}},
			{Name: "lyon", Nodes: []lab.NodeSpec{{Name: "lyo-1"}}},
		},
	}}}
}

// stickyWatch is how long after the old leader's LAN comes back the test
// checks that it does not take the lead back (it did 0.4-1.0 s after).
const stickyWatch = 15 * time.Second

// TestMeshLeaderKeepsTheLeadWhenTheOldLeaderComesBack cuts the LAN of a
// location's leader, waits until the other node leads, restores the LAN,
// and checks that the new leader keeps the lead: the old one was not ready
// for more than a lease duration, so it starts again as new.
func TestMeshLeaderKeepsTheLeadWhenTheOldLeaderComesBack(t *testing.T) {
	l := lab.StartT(t, stickyLab())
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	t.Cleanup(cancel)
	c := l.Cluster("sticky")
	// The namespace is explicit so that a kg from before the Leases moved
	// runs too (to see this test fail without the fix).
	as := startMesh(t, c, meshOptions{extra: []string{"--lease-namespace=" + k8s.DefaultLeaseNamespace}})
	old := waitLeaderOf(ctx, t, c, as, "paris", 60*time.Second)
	next := c.Node("par-1")
	if old == next {
		next = c.Node("par-2")
	}
	leaders := func() []string {
		var out []string
		for _, n := range c.Location("paris").Nodes() {
			if peers, err := wg(ctx, as[n.Name], "show", "kilo0", "peers"); err == nil && strings.TrimSpace(peers) != "" {
				out = append(out, n.Name)
			}
		}
		return out
	}
	if err := old.Down(); err != nil {
		t.Fatalf("cut %s off its LAN: %v", old.Name, err)
	}
	t.Cleanup(func() { _ = old.Up() })
	waitFor(ctx, t, 20*time.Second, next.Name+" leads alone", func() bool {
		got := leaders()
		return len(got) == 1 && got[0] == next.Name
	})
	if err := old.Up(); err != nil {
		t.Fatalf("restore the LAN of %s: %v", old.Name, err)
	}
	back := time.Now()
	for time.Since(back) < stickyWatch {
		if got := leaders(); len(got) != 1 || got[0] != next.Name {
			log, _ := os.ReadFile(as[old.Name].LogPath)
			t.Fatalf("%v after %s's LAN came back, paris leaders = %v, want only %s\nkg on %s:\n%s",
				time.Since(back).Round(time.Millisecond), old.Name, got, next.Name, old.Name, lastLines(string(log), 30))
		}
		time.Sleep(300 * time.Millisecond)
	}
	t.Logf("%s kept the lead for %v after %s (the old leader) came back", next.Name, stickyWatch, old.Name)
}

// lastLines returns the last n lines of s.
func lastLines(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	return strings.Join(lines[max(0, len(lines)-n):], "\n")
}
