//go:build linux

package federation

import (
	"context"
	"testing"
	"time"

	"github.com/kilofed/kilofed/e2e/lab"
)

// BenchmarkFederationGatewayFailover kills the agent of dr's public
// gateway (location gra) b.N times and reports how long after the kill a
// pod of prod reached dr's surviving gra pod again (s/restored, mean and
// worst) and prod's mirrored Peer took the new gateway's key (s/followed).
func BenchmarkFederationGatewayFailover(b *testing.B) {
	l := lab.StartT(b, twoClusters())
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Minute)
	defer cancel()
	f := startFed(ctx, b, l)
	if out, err := f.kilofed(ctx, "prod", "join", "dr", "--wait=2m"); err != nil {
		b.Fatalf("join: %v\n%s", err, out)
	}
	var restored, followed, worst time.Duration
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		r, fw := gatewayFailover(ctx, b, f, "gra")
		b.Logf("failover %d: traffic restored after %v, prod's Peer followed after %v", i+1, r.Round(time.Millisecond), fw.Round(time.Millisecond))
		restored += r
		followed += fw
		worst = max(worst, r)
	}
	b.StopTimer()
	b.ReportMetric(restored.Seconds()/float64(b.N), "s/restored")
	b.ReportMetric(worst.Seconds(), "s/worst-restored")
	b.ReportMetric(followed.Seconds()/float64(b.N), "s/followed")
}

// gatewayFailover kills the kg of dr's gateway of loc and returns how long
// prod's first public pod took to reach the location's other pod again and
// prod's Peer to take the new gateway's key; the old gateway comes back as
// a standby before it returns.
func gatewayFailover(ctx context.Context, tb testing.TB, f *fed, loc string) (restored, followed time.Duration) {
	tb.Helper()
	as := f.agents["dr"]
	leader := leaderOf(ctx, tb, f.dr, as, loc, 60*time.Second)
	var survivor *lab.Node
	for _, n := range f.dr.Location(loc).Nodes() {
		if n != leader {
			survivor = n
		}
	}
	const from = "echo-prod-par-1"
	pod := "echo-" + survivor.Name
	target := f.ips["dr"][pod]
	if _, err := answer(ctx, f.l, f.prod, from, target, pod, "dr", 60*time.Second); err != nil {
		tb.Fatalf("before the failover, prod/%s -> dr/%s: %v", from, pod, err)
	}
	old := mirroredPeer(ctx, tb, f.prod, "dr", loc).PublicKey
	start := time.Now()
	if err := as[leader.Name].Kill(); err != nil {
		tb.Fatalf("kill kg on %s: %v", leader.Name, err)
	}
	for deadline := start.Add(30 * time.Second); restored == 0 || followed == 0; {
		if time.Now().After(deadline) {
			tb.Fatalf("30 s after killing dr's gateway %s: restored after %v, Peer followed after %v (0: not yet)", leader.Name, restored, followed)
		}
		if followed == 0 && mirroredPeer(ctx, tb, f.prod, "dr", loc).PublicKey != old {
			followed = time.Since(start)
		}
		if got, err := probe(ctx, f.l, f.prod, from, target, 500*time.Millisecond); restored == 0 && err == nil && got[0] == pod {
			restored = time.Since(start)
		}
	}
	as[leader.Name] = startAgent(tb, leader)
	leaderOf(ctx, tb, f.dr, as, loc, 60*time.Second)
	return restored, followed
}
