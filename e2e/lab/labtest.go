package lab

import (
	"context"
	"log/slog"
	"os"
	"strings"
	"sync"
	"testing"
	"time"
)

// startTimeout bounds StartT's start-up (the machine may be loaded).
const startTimeout = 10 * time.Minute

// StartT starts a lab for a test or benchmark and registers its Close with
// t.Cleanup (which also prints the tails of the component logs when the
// test failed). When the lab cannot run here (not root, binaries missing:
// see Preflight), the test is skipped, or fails when CI=true. The lab's log
// goes to t.Log (debug level with KILOFED_LAB_DEBUG=1).
func StartT(t testing.TB, spec Spec, opts ...Option) *Lab {
	t.Helper()
	if err := Preflight(); err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("the lab cannot run on this machine (CI=true, so this fails instead of skipping): %v", err)
		}
		t.Skipf("the lab cannot run on this machine: %v", err)
	}
	w := &tbWriter{t: t}
	level := slog.LevelInfo
	if os.Getenv("KILOFED_LAB_DEBUG") == "1" {
		level = slog.LevelDebug
	}
	logger := slog.New(slog.NewTextHandler(w, &slog.HandlerOptions{Level: level}))
	ctx, cancel := context.WithTimeout(context.Background(), startTimeout)
	defer cancel()
	l, err := Start(ctx, spec, append([]Option{WithLogger(logger)}, opts...)...)
	if err != nil {
		w.close()
		t.Fatalf("start lab: %v", err)
	}
	closeOnInterrupt(l)
	t.Cleanup(func() {
		defer forgetOnInterrupt(l)
		if t.Failed() {
			t.Log("lab component logs:" + l.LogTails(30))
		}
		if err := l.Close(); err != nil {
			t.Errorf("close lab: %v", err)
		}
		w.close()
	})
	return l
}

// tbWriter writes log lines to t.Log until closed (logging to a finished
// test panics).
type tbWriter struct {
	mu     sync.Mutex
	t      testing.TB
	closed bool
}

func (w *tbWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if !w.closed {
		w.t.Log(strings.TrimRight(string(p), "\n"))
	}
	return len(p), nil
}

func (w *tbWriter) close() {
	w.mu.Lock()
	w.closed = true
	w.mu.Unlock()
}

// KubectlT runs the real kubectl against c for a test and returns its output;
// the test fails (with kubectl's output) when kubectl does.
func (c *Cluster) KubectlT(ctx context.Context, t testing.TB, args ...string) string {
	t.Helper()
	out, err := c.Kubectl(ctx, args...)
	if err != nil {
		t.Fatalf("kubectl %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return string(out)
}
