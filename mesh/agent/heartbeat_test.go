package agent

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/kilofed/kilofed/mesh/k8s"
)

// TestHeartbeatLogsOncePerOutage drives the heartbeat loop one beat per
// second through an API outage and a data-plane outage: each is logged
// once when it starts (a warning) and once when it ends (with how long it
// lasted), not once per beat.
func TestHeartbeatLogsOncePerOutage(t *testing.T) {
	var out bytes.Buffer
	log := slog.New(slog.NewTextHandler(&out, &slog.HandlerOptions{
		ReplaceAttr: func(_ []string, a slog.Attr) slog.Attr {
			if a.Key == slog.TimeKey || a.Key == "err" {
				return slog.Attr{}
			}
			return a
		},
	}))
	backend := k8s.NewFake()
	var forwardErr error
	a := &Agent{log: log, cfg: Config{Hostname: "n", Backend: backend, Forwarding: func() error { return forwardErr }}}
	h := heartbeats{a: a}
	now := time.Date(2026, 5, 1, 12, 0, 0, 0, time.UTC)
	beats := func(n int) {
		for range n {
			h.beat(context.Background(), now)
			now = now.Add(time.Second)
		}
	}
	beats(2)
	backend.FailHeartbeats(errors.New("connection refused"))
	beats(30)
	backend.FailHeartbeats(nil)
	beats(2)
	forwardErr = errors.New("eth0 has no carrier")
	beats(10)
	forwardErr = nil
	beats(2)

	var got []string
	for _, line := range strings.Split(strings.TrimSpace(out.String()), "\n") {
		got = append(got, regexp.MustCompile(`msg="([^"]*)"`).ReplaceAllStringFunc(line, func(m string) string {
			if head, _, cut := strings.Cut(m, ";"); cut {
				return head + `"` // the first clause of a long message
			}
			return m
		}))
	}
	want := []string{
		`level=WARN msg="heartbeat failed"`,
		`level=INFO msg="heartbeat renewed again" outage=30s failures=30`,
		`level=WARN msg="not forwarding: stopping heartbeats so that another node leads"`,
		`level=INFO msg="forwarding again: resuming heartbeats" stopped_for=10s`,
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("logs (-want +got):\n%s", diff)
	}
	if n := backend.HeartbeatCount("n"); n != 2+2+2 {
		t.Errorf("%d heartbeats succeeded, want 6 (none while failing or not forwarding)", n)
	}
}
