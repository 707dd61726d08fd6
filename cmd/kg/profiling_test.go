package main

import (
	"net/http"
	"net/http/httptest"
	"testing"
)

func TestProfilingServesProfilesBesideTheAgentsEndpointsAndOnlyWhenAsked(t *testing.T) {
	agent := http.NewServeMux()
	agent.HandleFunc("GET /metrics", func(w http.ResponseWriter, r *http.Request) { w.Write([]byte("metrics")) })
	for _, tc := range []struct {
		name    string
		handler http.Handler
		path    string
		want    int
	}{
		{"without --profiling, no profiles", agent, "/debug/pprof/heap", http.StatusNotFound},
		{"with --profiling, the heap profile", withProfiling(agent), "/debug/pprof/heap", http.StatusOK},
		{"with --profiling, the index", withProfiling(agent), "/debug/pprof/", http.StatusOK},
		{"with --profiling, the agent's endpoints still served", withProfiling(agent), "/metrics", http.StatusOK},
		{"with --profiling, an unknown path is still not found", withProfiling(agent), "/nothing", http.StatusNotFound},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rec := httptest.NewRecorder()
			tc.handler.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, tc.path, nil))
			if rec.Code != tc.want {
				t.Errorf("GET %s: %d, want %d", tc.path, rec.Code, tc.want)
			}
		})
	}
}
