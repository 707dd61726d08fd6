//go:build linux

package mesh

import (
	"context"
	"fmt"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/kilofed/kilofed/e2e/lab"
)

const (
	// rotationProbeEvery paces the probes of TestMeshKeyRotation; a probe
	// not answered within rotationProbeTimeout is lost.
	rotationProbeEvery   = 100 * time.Millisecond
	rotationProbeTimeout = 400 * time.Millisecond
	// rotationLossBound is a sane upper bound of the traffic a rotation
	// may lose; the measured loss is logged, not asserted tighter.
	rotationLossBound = 10 * time.Second
)

// rotationProber probes one pod from another every rotationProbeEvery and
// counts the time lost: a lost probe loses the time until the next one.
type rotationProber struct {
	from, to string

	mu     sync.Mutex
	sent   []time.Time
	ok     []bool
	detail []string
}

// run probes until ctx ends.
func (p *rotationProber) run(ctx context.Context, l *lab.Lab, c *lab.Cluster, ip string) {
	next := time.Now()
	for {
		select {
		case <-ctx.Done():
			return
		case <-time.After(time.Until(next)):
		}
		next = time.Now().Add(rotationProbeEvery)
		sent := time.Now()
		got, err := probe(ctx, l, c, p.from, ip, rotationProbeTimeout)
		if ctx.Err() != nil {
			return
		}
		p.mu.Lock()
		p.sent = append(p.sent, sent)
		p.ok = append(p.ok, err == nil && got == p.to)
		if err != nil || got != p.to {
			p.detail = append(p.detail, fmt.Sprintf("%s lost after %v: %q %v", sent.UTC().Format("15:04:05.000"), time.Since(sent).Round(time.Millisecond), got, firstLine(err)))
		}
		p.mu.Unlock()
	}
}

// loss returns the probes sent, those lost, the time lost, and whether the
// last probe was answered.
func (p *rotationProber) loss() (sent, lost int, d time.Duration, lastOK bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for i, ok := range p.ok {
		if ok {
			continue
		}
		lost++
		if i+1 < len(p.sent) {
			d += p.sent[i+1].Sub(p.sent[i])
		} else {
			d += rotationProbeEvery
		}
	}
	return len(p.ok), lost, d, len(p.ok) > 0 && p.ok[len(p.ok)-1]
}

// TestMeshKeyRotationOfALeaderWhileTrafficFlows rotates the key of the
// leader of aws-euwest3 with `kilofed rotate-keys` while pods of the two
// other locations (one behind NAT) probe a pod behind it continuously: the
// other leaders take the new key with no other step, traffic resumes, and
// the traffic lost is logged as "rotation loss". A restart of the agent
// then keeps the rotated key.
func TestMeshKeyRotationOfALeaderWhileTrafficFlows(t *testing.T) {
	ctx, l, c, ips := startMetaCloud(t, metaCloud(), 8*time.Minute)
	opts := meshOptions{granularity: "location", encapsulate: "never"}
	as := startMesh(t, c, opts)
	leader, newKey, _ := rotateLeaderWhileProbing(ctx, t, l, c, as, ips, "aws-euwest3")

	// A restart does not rotate again: the request is still on the Node.
	if err := as[leader.Name].Stop(); err != nil {
		t.Fatalf("stop kg on %s: %v", leader.Name, err)
	}
	as[leader.Name] = startAgent(t, leader, opts)
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(300 * time.Millisecond) {
		got, err := wg(ctx, as[leader.Name], "show", "kilo0", "public-key")
		if err == nil && strings.TrimSpace(got) != "" {
			if k := strings.TrimSpace(got); k != newKey {
				t.Errorf("after a restart, %s has key %s, want the rotated key %s kept", leader.Name, k, newKey)
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("kg on %s did not come back: %v", leader.Name, err)
		}
	}
}

// BenchmarkKeyRotation rotates the key of aws-euwest3's leader b.N times
// (-benchtime=3x) while traffic flows, and reports the worst traffic lost
// per rotation (loss-ms/op) and overall (max-loss-ms).
func BenchmarkKeyRotation(b *testing.B) {
	ctx, l, c, ips := startMetaCloud(b, metaCloud(), 10*time.Minute)
	as := startMesh(b, c, meshOptions{granularity: "location", encapsulate: "never"})
	var total, worst time.Duration
	for b.Loop() {
		_, _, loss := rotateLeaderWhileProbing(ctx, b, l, c, as, ips, "aws-euwest3")
		total += loss
		worst = max(worst, loss)
	}
	b.ReportMetric(float64(total.Milliseconds())/float64(b.N), "loss-ms/op")
	b.ReportMetric(float64(worst.Milliseconds()), "max-loss-ms")
}

// rotateLeaderWhileProbing rotates the key of loc's leader with `kilofed
// rotate-keys` while pods of two other locations (scw-1, and dc-1 behind
// NAT) probe the leader's pod, checks that the other leaders take the new
// key and traffic resumes, logs "rotation loss: N ms" and returns the
// leader, its new key and the worst loss.
func rotateLeaderWhileProbing(ctx context.Context, t testing.TB, l *lab.Lab, c *lab.Cluster, as agents, ips map[string]string, loc string) (*lab.Node, string, time.Duration) {
	t.Helper()
	leader := waitLeaderOf(ctx, t, c, as, loc, 60*time.Second)
	target := "echo-" + leader.Name
	probers := []*rotationProber{{from: "echo-scw-1", to: target}, {from: "echo-dc-1", to: target}}
	for _, p := range probers {
		if got, err := get(ctx, l, c, p.from, ips[target], 60*time.Second); err != nil || !strings.HasPrefix(got, target) {
			t.Fatalf("before the rotation, %s -> %s: %q %v", p.from, target, got, err)
		}
	}
	var others []*lab.Node
	for _, o := range c.Locations() {
		if o.Name != loc {
			others = append(others, waitLeaderOf(ctx, t, c, as, o.Name, 30*time.Second))
		}
	}
	oldKey := wgPublicKey(ctx, t, as[leader.Name])
	for _, o := range others {
		waitPeerKey(ctx, t, as[o.Name], oldKey, true, 30*time.Second)
	}

	pctx, stop := context.WithCancel(ctx)
	var running sync.WaitGroup
	for _, p := range probers {
		running.Go(func() { p.run(pctx, l, c, ips[target]) })
	}
	defer func() { stop(); running.Wait() }()
	time.Sleep(2 * time.Second) // a baseline of answered probes before the rotation

	start := time.Now()
	cmd := exec.CommandContext(ctx, filepath.Join(binDir, "kilofed"), "--kubeconfig", c.Kubeconfig,
		"rotate-keys", "--node", leader.Name, "--timeout", "30s")
	out, err := cmd.CombinedOutput()
	took := time.Since(start)
	t.Logf("kilofed rotate-keys --node %s (%v):\n%s", leader.Name, took.Round(time.Millisecond), out)
	if err != nil {
		t.Fatalf("kilofed rotate-keys: %v", err)
	}
	if !strings.Contains(string(out), "rotated the keys of 1 node(s)") || !strings.Contains(string(out), oldKey[:8]+"... -> ") {
		t.Errorf("rotate-keys output lacks the verdict or the old key's prefix %s", oldKey[:8])
	}
	newKey := wgPublicKey(ctx, t, as[leader.Name])
	if newKey == oldKey {
		t.Fatalf("the device of %s still has its old key %s", leader.Name, oldKey)
	}
	if !strings.Contains(string(out), newKey[:8]+"...") {
		t.Errorf("rotate-keys output does not name the device's new key %s", newKey[:8])
	}
	for _, o := range others {
		waitPeerKey(ctx, t, as[o.Name], newKey, true, 10*time.Second)
		waitPeerKey(ctx, t, as[o.Name], oldKey, false, 10*time.Second)
	}
	followed := time.Since(start)

	// Traffic resumes: every prober's latest probes are answered.
	deadline := time.Now().Add(rotationLossBound)
	for _, p := range probers {
		for {
			_, _, _, ok := p.loss()
			if ok {
				break
			}
			if time.Now().After(deadline) {
				t.Errorf("%s -> %s: no answer %v after the rotation", p.from, target, rotationLossBound)
				break
			}
			time.Sleep(rotationProbeEvery)
		}
	}
	time.Sleep(time.Second) // a tail of answered probes after it
	stop()
	running.Wait()

	var worst time.Duration
	for _, p := range probers {
		sent, lost, d, ok := p.loss()
		worst = max(worst, d)
		t.Logf("%s -> %s: %d probes every %v, %d lost (%v), last answered %v; lost probes:\n  %s",
			p.from, target, sent, rotationProbeEvery, lost, d, ok, strings.Join(p.detail, "\n  "))
		if d > rotationLossBound {
			t.Errorf("%s -> %s lost %v of traffic to the rotation, more than %v", p.from, target, d, rotationLossBound)
		}
	}
	t.Logf("rotation loss: %d ms (worst of scaleway and behind NAT; key %s... -> %s..., reported in %v, followed by the other leaders in %v)",
		worst.Milliseconds(), oldKey[:8], newKey[:8], took.Round(time.Millisecond), followed.Round(time.Millisecond))
	return leader, newKey, worst
}

// wgPublicKey returns the public key of agent's WireGuard interface.
func wgPublicKey(ctx context.Context, t testing.TB, agent *lab.Process) string {
	t.Helper()
	out, err := wg(ctx, agent, "show", "kilo0", "public-key")
	if err != nil {
		t.Fatalf("wg show kilo0 public-key: %v\n%s", err, out)
	}
	return strings.TrimSpace(out)
}

// waitPeerKey waits until agent's WireGuard device has (want) or no longer
// has (!want) a peer with key.
func waitPeerKey(ctx context.Context, t testing.TB, agent *lab.Process, key string, want bool, within time.Duration) {
	t.Helper()
	var out string
	for deadline := time.Now().Add(within); ; time.Sleep(100 * time.Millisecond) {
		out, _ = wg(ctx, agent, "show", "kilo0", "peers")
		if strings.Contains(out, key) == want {
			return
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			break
		}
	}
	t.Fatalf("WireGuard peer %s present %v after %v, want %v; peers:\n%s", key, !want, within, want, out)
}
