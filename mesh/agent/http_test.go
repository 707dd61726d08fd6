package agent

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
)

// get fetches path from the agent's Handler.
func (r *rig) get(t *testing.T, path string) (int, string) {
	t.Helper()
	rec := httptest.NewRecorder()
	r.agent.Handler(r.reg).ServeHTTP(rec, httptest.NewRequest(http.MethodGet, path, nil))
	body, _ := io.ReadAll(rec.Result().Body)
	return rec.Code, string(body)
}

func TestPartialErrorKeepsHealthAndFailsReadiness(t *testing.T) {
	r := newRig(t, "node-beijing", 1)
	if code, body := r.get(t, "/ready"); code != http.StatusServiceUnavailable || !strings.Contains(body, "not reconciled yet") {
		t.Errorf("/ready before the first reconcile = %d %q, want 503 not reconciled yet", code, body)
	}
	r.router.Err = errors.New("netlink: operation not permitted")
	if err := r.agent.Reconcile(context.Background()); err == nil {
		t.Fatal("Reconcile with a failing router succeeded")
	}
	if code, body := r.get(t, "/health"); code != http.StatusOK {
		t.Errorf("/health after a partial error = %d %q, want 200: a restart would drop the lead", code, body)
	}
	if code, body := r.get(t, "/ready"); code != http.StatusServiceUnavailable || !strings.Contains(body, "routes: netlink: operation not permitted") {
		t.Errorf("/ready after a partial error = %d %q, want 503 naming the routes step", code, body)
	}
	for _, s := range reconcileSteps {
		want := 0.0
		if s == stepRoutes {
			want = 1
		}
		if got := testutil.ToFloat64(r.agent.cfg.Metrics.stepErrors.WithLabelValues(s)); got != want {
			t.Errorf("kilo_reconcile_step_errors{step=%q} = %v, want %v", s, got, want)
		}
	}

	r.router.Err = nil
	if err := r.agent.Reconcile(context.Background()); err != nil {
		t.Fatal(err)
	}
	if code, body := r.get(t, "/ready"); code != http.StatusOK {
		t.Errorf("/ready after a clean reconcile = %d %q, want 200", code, body)
	}
	if got := testutil.ToFloat64(r.agent.cfg.Metrics.stepErrors.WithLabelValues(stepRoutes)); got != 0 {
		t.Errorf("kilo_reconcile_step_errors{step=routes} after a clean reconcile = %v, want 0", got)
	}
}

func TestHealthFailsOnlyWhenTheLoopIsStuck(t *testing.T) {
	r := newRig(t, "node-beijing", 1, func(c *Config) { c.ResyncPeriod = 30 * time.Second })
	t0 := time.Unix(1e9, 0)
	now := t0
	r.agent.now = func() time.Time { return now }
	r.agent.started = t0

	now = t0.Add(89 * time.Second)
	if code, body := r.get(t, "/health"); code != http.StatusOK {
		t.Errorf("/health 89 s after start, no reconcile yet = %d %q, want 200", code, body)
	}
	now = t0.Add(91 * time.Second)
	if code, body := r.get(t, "/health"); code != http.StatusServiceUnavailable || !strings.Contains(body, "first reconciliation") {
		t.Errorf("/health 91 s after start, no reconcile yet = %d %q, want 503", code, body)
	}
	r.router.Err = errors.New("boom") // a failed reconcile is still progress
	if err := r.agent.Reconcile(context.Background()); err == nil {
		t.Fatal("Reconcile with a failing router succeeded")
	}
	if code, body := r.get(t, "/health"); code != http.StatusOK {
		t.Errorf("/health right after a failed reconcile = %d %q, want 200", code, body)
	}
	now = now.Add(91 * time.Second)
	if code, body := r.get(t, "/health"); code != http.StatusServiceUnavailable || !strings.Contains(body, "no reconciliation finished for 1m31s") {
		t.Errorf("/health 3 resync periods after the last reconcile = %d %q, want 503", code, body)
	}
}

func TestGraphIsServedOnlyWhenAsked(t *testing.T) {
	for _, tt := range []struct {
		name  string
		serve bool
		want  int
	}{
		{name: "off by default", want: http.StatusNotFound},
		{name: "ServeGraph", serve: true, want: http.StatusOK},
	} {
		t.Run(tt.name, func(t *testing.T) {
			r := newRig(t, "node-beijing", 1, func(c *Config) { c.ServeGraph = tt.serve })
			if err := r.agent.Reconcile(context.Background()); err != nil {
				t.Fatal(err)
			}
			code, body := r.get(t, "/graph")
			if code != tt.want {
				t.Errorf("/graph = %d, want %d", code, tt.want)
			}
			if has := strings.Contains(body, "node-shanghai"); has != tt.serve {
				t.Errorf("/graph shows the topology: %v, want %v\n%s", has, tt.serve, body)
			}
			if code, _ := r.get(t, "/metrics"); code != http.StatusOK {
				t.Errorf("/metrics = %d, want 200", code)
			}
		})
	}
}
