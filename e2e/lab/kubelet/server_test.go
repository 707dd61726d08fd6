package kubelet

import (
	"bufio"
	"context"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"os"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
)

// denyAll refuses every request.
type denyAll struct{}

func (denyAll) authorize(context.Context, userInfo, string, []string) (bool, string, error) {
	return false, "denied by test", nil
}

// asAPIServer makes every request look like one from the API server's
// verified kubelet client certificate.
func asAPIServer(h http.Handler) http.Handler {
	cert := &x509.Certificate{Subject: pkix.Name{CommonName: "kube-apiserver-kubelet-client", Organization: []string{"system:masters"}}}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		r.TLS = &tls.ConnectionState{VerifiedChains: [][]*x509.Certificate{{cert}}}
		h.ServeHTTP(w, r)
	})
}

// apiTestKubelet returns a test kubelet running pod default/web (UID
// uid-web, container c, a sleeping alpine) whose log file holds two runs.
func apiTestKubelet(t *testing.T) *testKubelet {
	t.Helper()
	tk := newTestKubelet(t)
	tk.apply(t, reconcilePod("web", "uid-web", corev1.RestartPolicyAlways, corev1.Container{Image: "alpine",
		Env: []corev1.EnvVar{{Name: "GREETING", Value: "ni hao"}, {Name: "FROM_SECRET", ValueFrom: &corev1.EnvVarSource{}}}}))
	t0 := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	data := runMarker(t0, []string{"sleep"}) + "run one\n" + runMarker(t0.Add(time.Second), []string{"sleep"}) + "line 1\nline 2\nline 3\n"
	if err := os.WriteFile(tk.logPath("default", "web", "c"), []byte(data), 0o644); err != nil {
		t.Fatal(err)
	}
	return tk
}

func TestAPIRoutes(t *testing.T) {
	tests := []struct {
		name       string
		method     string
		path       string
		plain      bool // no client certificate
		authz      authorizer
		wantStatus int
		wantBody   string // substring
	}{
		{name: "healthz", method: "GET", path: "/healthz", wantStatus: 200, wantBody: "ok"},
		{name: "no client certificate", method: "GET", path: "/healthz", plain: true, wantStatus: 401, wantBody: "Unauthorized"},
		{name: "forbidden", method: "GET", path: "/containerLogs/default/web/c", authz: denyAll{}, wantStatus: 403,
			wantBody: "Forbidden (user=kube-apiserver-kubelet-client, verb=get, resource=nodes, subresource(s)=[proxy])"},
		{name: "logs of the current run", method: "GET", path: "/containerLogs/default/web/c", wantStatus: 200, wantBody: "line 1\nline 2\nline 3\n"},
		{name: "logs tail", method: "GET", path: "/containerLogs/default/web/c?tailLines=1", wantStatus: 200, wantBody: "line 3\n"},
		{name: "logs limit", method: "GET", path: "/containerLogs/default/web/c?limitBytes=4", wantStatus: 200, wantBody: "line"},
		{name: "logs of the previous run", method: "GET", path: "/containerLogs/default/web/c?previous=true", wantStatus: 200, wantBody: "run one\n"},
		{name: "logs unsupported option", method: "GET", path: "/containerLogs/default/web/c?timestamps=true", wantStatus: 400, wantBody: "drop --timestamps"},
		{name: "logs of a missing pod", method: "GET", path: "/containerLogs/default/nope/c", wantStatus: 404, wantBody: `pod "default/nope" does not exist`},
		{name: "logs of a missing container", method: "GET", path: "/containerLogs/default/web/x", wantStatus: 404, wantBody: `container "x" not found`},
		{name: "exec without command", method: "POST", path: "/exec/default/web/c?output=1", wantStatus: 400, wantBody: "missing command"},
		{name: "exec without streams", method: "POST", path: "/exec/default/web/c?command=true", wantStatus: 400, wantBody: "at least 1 of stdin, stdout, stderr"},
		{name: "exec into a missing pod", method: "POST", path: "/exec/default/nope/c?command=true&output=1", wantStatus: 404, wantBody: "does not exist"},
		{name: "exec with a stale UID", method: "POST", path: "/exec/default/web/uid-old/c?command=true&output=1", wantStatus: 404, wantBody: "has UID uid-web, not uid-old"},
		{name: "exec with PUT", method: "PUT", path: "/exec/default/web/c?command=true&output=1", wantStatus: 405},
		{name: "unknown path", method: "GET", path: "/pods", wantStatus: 404},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tk := apiTestKubelet(t)
			if tt.authz != nil {
				tk.authz = tt.authz
			}
			h := tk.apiHandler()
			if !tt.plain {
				h = asAPIServer(h)
			}
			rec := httptest.NewRecorder()
			h.ServeHTTP(rec, httptest.NewRequest(tt.method, tt.path, nil))
			if rec.Code != tt.wantStatus || !strings.Contains(rec.Body.String(), tt.wantBody) {
				t.Errorf("%s %s = %d %q, want %d with %q", tt.method, tt.path, rec.Code, rec.Body.String(), tt.wantStatus, tt.wantBody)
			}
			if tt.wantStatus == 200 && strings.HasPrefix(tt.path, "/containerLogs") && !strings.Contains(tt.path, "limitBytes") &&
				rec.Body.String() != tt.wantBody {
				t.Errorf("log body %q, want exactly %q", rec.Body.String(), tt.wantBody)
			}
		})
	}
}

func TestAPIRefusesExecIntoFinishedPod(t *testing.T) {
	tk := apiTestKubelet(t)
	tk.procs.exit(0, tk.clock)
	rec := httptest.NewRecorder()
	asAPIServer(tk.apiHandler()).ServeHTTP(rec, httptest.NewRequest("POST", "/exec/default/web/c?command=true&output=1", nil))
	if rec.Code != 400 || !strings.Contains(rec.Body.String(), `container "c" of pod default/web is not running`) {
		t.Errorf("exec into an exited container = %d %q, want 400 not running", rec.Code, rec.Body.String())
	}
}

func TestLogsFollowUntilRunEnds(t *testing.T) {
	tk := apiTestKubelet(t)
	srv := httptest.NewServer(asAPIServer(tk.apiHandler()))
	defer srv.Close()
	resp, err := http.Get(srv.URL + "/containerLogs/default/web/c?follow=true&tailLines=1")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	r := bufio.NewReader(resp.Body)
	readLine := func(want string) {
		t.Helper()
		got, err := r.ReadString('\n')
		if err != nil || got != want {
			t.Fatalf("read %q, %v; want %q", got, err, want)
		}
	}
	readLine("line 3\n")
	appendLog := func(s string) {
		f, err := os.OpenFile(tk.logPath("default", "web", "c"), os.O_APPEND|os.O_WRONLY, 0)
		if err != nil {
			t.Fatal(err)
		}
		defer f.Close()
		if _, err := f.WriteString(s); err != nil {
			t.Fatal(err)
		}
	}
	appendLog("line 4\n")
	readLine("line 4\n")
	appendLog("last words")
	tk.procs.exit(1, tk.clock) // the run ends: the stream ends after its last output
	rest, err := io.ReadAll(r)
	if err != nil || string(rest) != "last words" {
		t.Errorf("rest of the stream %q, %v; want %q", rest, err, "last words")
	}
}

func TestLogsFollowStopsAtRestart(t *testing.T) {
	tk := apiTestKubelet(t)
	srv := httptest.NewServer(asAPIServer(tk.apiHandler()))
	defer srv.Close()
	resp, err := http.Get(srv.URL + "/containerLogs/default/web/c?follow=true&tailLines=0")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	f, err := os.OpenFile(tk.logPath("default", "web", "c"), os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	_, _ = f.WriteString("before\n" + runMarker(tk.clock, []string{"sleep"}) + "after\n")
	f.Close()
	done := make(chan string, 1)
	go func() {
		b, _ := io.ReadAll(resp.Body)
		done <- string(b)
	}()
	select {
	case got := <-done:
		if got != "before\n" {
			t.Errorf("followed %q, want only %q (the new run is not this one)", got, "before\n")
		}
	case <-time.After(10 * time.Second):
		t.Fatal("follow did not end at the restart marker")
	}
}

func TestServingEndpoint(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	port := int32(ln.Addr().(*net.TCPAddr).Port)
	var none *ServingConfig
	if a, p := none.endpoint(); a.IsValid() || p != 10250 {
		t.Errorf("no serving: endpoint %v %d, want none 10250", a, p)
	}
	s := &ServingConfig{Listener: ln}
	if a, p := s.endpoint(); a != netip.MustParseAddr("127.0.0.1") || p != port {
		t.Errorf("endpoint %v %d, want 127.0.0.1 %d", a, p, port)
	}
	s.Address = netip.MustParseAddr("100.64.1.10")
	if a, p := s.endpoint(); a != s.Address || p != port {
		t.Errorf("endpoint %v %d, want %v %d", a, p, s.Address, port)
	}
}

func TestServingConfigValidate(t *testing.T) {
	any4, err := net.Listen("tcp", "0.0.0.0:0")
	if err != nil {
		t.Fatal(err)
	}
	defer any4.Close()
	good := testServing(t)
	defer good.Listener.Close()
	tests := []struct {
		name    string
		mutate  func(s *ServingConfig)
		wantErr string
	}{
		{name: "good", mutate: func(*ServingConfig) {}},
		{name: "no listener", mutate: func(s *ServingConfig) { s.Listener = nil }, wantErr: "no Listener"},
		{name: "no certificate", mutate: func(s *ServingConfig) { s.Certificate = tls.Certificate{} }, wantErr: "no Certificate"},
		{name: "no client CAs", mutate: func(s *ServingConfig) { s.ClientCAs = nil }, wantErr: "no ClientCAs"},
		{name: "wildcard listener without address", mutate: func(s *ServingConfig) { s.Listener = any4 }, wantErr: "has no specific IP"},
		{name: "wildcard listener with address", mutate: func(s *ServingConfig) { s.Listener, s.Address = any4, netip.MustParseAddr("100.64.1.10") }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := *good
			tt.mutate(&s)
			err := s.validate()
			if tt.wantErr == "" {
				if err != nil {
					t.Fatalf("validate: %v", err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
				t.Fatalf("validate = %v, want an error with %q", err, tt.wantErr)
			}
		})
	}
}
