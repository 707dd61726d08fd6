//go:build linux

package federation

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"
)

// rotationProbeEvery paces the probes of testKeyRotation; a lost probe
// loses the time until the next one.
const rotationProbeEvery = 100 * time.Millisecond

// testKeyRotation: `kilofed rotate-keys` on dr's gateway of gra while pods
// of prod (public and behind NAT) probe a pod behind it: prod's mirrored
// Peer takes the new key with no other step, traffic resumes, and the
// traffic lost is logged as "cross-cluster rotation loss".
func testKeyRotation(ctx context.Context, t *testing.T, f *fed) {
	const loc = "gra"
	as := f.agents["dr"]
	leader := leaderOf(ctx, t, f.dr, as, loc, 60*time.Second)
	pod := "echo-" + leader.Name
	target := f.ips["dr"][pod]
	froms := []string{"echo-prod-par-1", "echo-prod-dc-1"}
	for _, from := range froms {
		if _, err := answer(ctx, f.l, f.prod, from, target, pod, "dr", 60*time.Second); err != nil {
			t.Fatalf("before the rotation, prod/%s -> dr/%s: %v", from, pod, err)
		}
	}
	oldKey := publicKey(ctx, t, as[leader.Name])
	if got := mirroredPeer(ctx, t, f.prod, "dr", loc).PublicKey; got != oldKey {
		t.Fatalf("prod's Peer of dr/%s has key %s, want the gateway's %s before the rotation", loc, got, oldKey)
	}

	type result struct {
		sent, lost int
		loss       time.Duration
		lastOK     bool
	}
	results := make([]result, len(froms))
	pctx, stop := context.WithCancel(ctx)
	var running sync.WaitGroup
	for i, from := range froms {
		running.Go(func() {
			var lastSent time.Time
			lastLost := false
			for next := time.Now(); ; {
				select {
				case <-pctx.Done():
					return
				case <-time.After(time.Until(next)):
				}
				next = time.Now().Add(rotationProbeEvery)
				sent := time.Now()
				got, err := probe(pctx, f.l, f.prod, from, target, 400*time.Millisecond)
				if pctx.Err() != nil {
					return
				}
				ok := err == nil && got[0] == pod
				r := &results[i]
				if lastLost {
					r.loss += sent.Sub(lastSent)
				}
				r.sent++
				if !ok {
					r.lost++
				}
				r.lastOK, lastLost, lastSent = ok, !ok, sent
			}
		})
	}
	defer func() { stop(); running.Wait() }()
	time.Sleep(2 * time.Second) // answered probes before the rotation

	start := time.Now()
	out, err := f.kilofed(ctx, "dr", "rotate-keys", "--node", leader.Name, "--timeout", "30s")
	took := time.Since(start)
	t.Logf("kilofed --context dr rotate-keys --node %s (%v):\n%s", leader.Name, took.Round(time.Millisecond), out)
	if err != nil {
		t.Fatalf("rotate-keys: %v", err)
	}
	newKey := publicKey(ctx, t, as[leader.Name])
	if newKey == oldKey {
		t.Fatalf("dr's gateway %s kept its key", leader.Name)
	}
	var followed time.Duration
	for deadline := start.Add(15 * time.Second); ; time.Sleep(100 * time.Millisecond) {
		if mirroredPeer(ctx, t, f.prod, "dr", loc).PublicKey == newKey {
			followed = time.Since(start)
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("prod's Peer of dr/%s did not take the new key %s within 15 s", loc, newKey)
		}
	}
	// Let traffic resume (WireGuard retries a handshake after 5 s), then a
	// tail of answered probes.
	time.Sleep(10 * time.Second)
	stop()
	running.Wait()

	var worst time.Duration
	for i, from := range froms {
		r := results[i]
		worst = max(worst, r.loss)
		t.Logf("prod/%s -> dr/%s: %d probes every %v, %d lost (%v), last answered %v", from, pod, r.sent, rotationProbeEvery, r.lost, r.loss, r.lastOK)
		if !r.lastOK {
			t.Errorf("prod/%s -> dr/%s: traffic did not resume within 10 s of prod's Peer following", from, pod)
		}
		if r.loss > 10*time.Second {
			t.Errorf("prod/%s -> dr/%s lost %v to the rotation", from, pod, r.loss)
		}
	}
	t.Logf("cross-cluster rotation loss: %d ms (worst of public and behind NAT; key %s... -> %s..., reported in %v, prod's Peer followed in %v)",
		worst.Milliseconds(), oldKey[:8], newKey[:8], took.Round(time.Millisecond), followed.Round(time.Millisecond))
	if failed := crossPairs(ctx, f, 60*time.Second); len(failed) > 0 {
		t.Errorf("after the rotation, pairs fail:\n%s", strings.Join(failed, "\n"))
	}
}
