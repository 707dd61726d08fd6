package kubelet

import (
	"context"
	"net"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
)

func TestProbeStateThresholds(t *testing.T) {
	tests := []struct {
		name             string
		kind             probeKind
		success, failure int32
		results          string // t = success, f = failure
		want             string // verdict after each result
	}{
		{name: "readiness starts unready, one success makes it ready", kind: readinessProbe, success: 1, failure: 3,
			results: "tffft", want: "TTTFT"},
		{name: "readiness needs successThreshold in a row", kind: readinessProbe, success: 3, failure: 1,
			results: "ttfttt", want: "FFFFFT"},
		{name: "readiness failureThreshold 1", kind: readinessProbe, success: 1, failure: 1,
			results: "tftf", want: "TFTF"},
		{name: "liveness starts alive, fails after failureThreshold in a row", kind: livenessProbe, success: 1, failure: 2,
			results: "ftfft", want: "TTTFT"},
		{name: "liveness ignores successThreshold", kind: livenessProbe, success: 5, failure: 1,
			results: "ft", want: "FT"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			st := newProbeState(tt.kind, probeSettings{success: tt.success, failure: tt.failure})
			var got strings.Builder
			prev := st.result
			for _, r := range tt.results {
				changed := st.record(r == 't')
				if changed != (st.result != prev) {
					t.Errorf("record reported changed=%v, verdict went %v -> %v", changed, prev, st.result)
				}
				prev = st.result
				if st.result {
					got.WriteByte('T')
				} else {
					got.WriteByte('F')
				}
			}
			if got.String() != tt.want {
				t.Errorf("verdicts %s, want %s", got.String(), tt.want)
			}
		})
	}
}

func TestProbeSettingsDefaults(t *testing.T) {
	got := settingsOf(&corev1.Probe{})
	want := probeSettings{period: 10 * time.Second, timeout: time.Second, success: 1, failure: 3}
	if got != want {
		t.Errorf("defaults %+v, want %+v", got, want)
	}
	got = settingsOf(&corev1.Probe{InitialDelaySeconds: 2, PeriodSeconds: 3, TimeoutSeconds: 4, SuccessThreshold: 5, FailureThreshold: 6})
	want = probeSettings{initialDelay: 2 * time.Second, period: 3 * time.Second, timeout: 4 * time.Second, success: 5, failure: 6}
	if got != want {
		t.Errorf("settings %+v, want %+v", got, want)
	}
}

func TestProbeOnce(t *testing.T) {
	tk := newTestKubelet(t)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/ok":
			if r.Header.Get("X-Check") != "yes" || r.Host != "example.test" || !strings.HasPrefix(r.UserAgent(), "kube-probe/") {
				w.WriteHeader(http.StatusBadRequest)
			}
		case "/redirect":
			http.Redirect(w, r, "http://192.0.2.1/elsewhere", http.StatusFound)
		case "/slow":
			<-r.Context().Done()
		default:
			w.WriteHeader(http.StatusServiceUnavailable)
		}
	}))
	defer srv.Close()
	host, portStr, _ := net.SplitHostPort(srv.Listener.Addr().String())
	port, _ := strconv.Atoi(portStr)
	closed := freeTCPPort(t)
	target := probeTarget{podIP: host, ports: []corev1.ContainerPort{{Name: "metrics", ContainerPort: int32(port)}}}
	httpGet := func(path string, p intstr.IntOrString, headers ...corev1.HTTPHeader) *corev1.Probe {
		return &corev1.Probe{ProbeHandler: corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{Path: path, Port: p, HTTPHeaders: headers}}}
	}
	tcp := func(p intstr.IntOrString) *corev1.Probe {
		return &corev1.Probe{ProbeHandler: corev1.ProbeHandler{TCPSocket: &corev1.TCPSocketAction{Port: p}}}
	}
	execP := func(argv ...string) *corev1.Probe {
		return &corev1.Probe{ProbeHandler: corev1.ProbeHandler{Exec: &corev1.ExecAction{Command: argv}}}
	}
	tests := []struct {
		name    string
		probe   *corev1.Probe
		want    bool
		wantWhy string
	}{
		{name: "httpGet 200 with headers and Host, by port name", want: true,
			probe: httpGet("/ok", intstr.FromString("metrics"), corev1.HTTPHeader{Name: "X-Check", Value: "yes"}, corev1.HTTPHeader{Name: "Host", Value: "example.test"})},
		{name: "httpGet 3xx passes without following", probe: httpGet("/redirect", intstr.FromInt32(int32(port))), want: true},
		{name: "httpGet 503 fails", probe: httpGet("/fail", intstr.FromInt32(int32(port))), wantWhy: "statuscode: 503"},
		{name: "httpGet timeout fails", probe: httpGet("/slow", intstr.FromInt32(int32(port))), wantWhy: "deadline exceeded"},
		{name: "httpGet unknown port name", probe: httpGet("/ok", intstr.FromString("nope")), wantWhy: `"nope" is not a container port's name`},
		{name: "tcpSocket open", probe: tcp(intstr.FromInt32(int32(port))), want: true},
		{name: "tcpSocket closed", probe: tcp(intstr.FromInt32(int32(closed))), wantWhy: "refused"},
		{name: "exec exit 0", probe: execP("true"), want: true},
		{name: "exec exit 3", probe: execP("sh", "-c", "exit 3"), wantWhy: "exit code 3"},
		{name: "exec sees the run's env", probe: execP("sh", "-c", `test "$MODE" = fast`), want: true},
		{name: "exec timeout", probe: execP("sleep", "5"), wantWhy: "timed out"},
		{name: "grpc is not run and passes", probe: &corev1.Probe{ProbeHandler: corev1.ProbeHandler{GRPC: &corev1.GRPCAction{Port: 1}}}, want: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tgt := target
			tgt.env = []string{"PATH=" + execPath, "MODE=fast"}
			ok, why := tk.probeOnce(context.Background(), tt.probe, tgt, 300*time.Millisecond)
			if ok != tt.want || (tt.wantWhy != "" && !strings.Contains(why, tt.wantWhy)) {
				t.Errorf("probe = %v %q, want %v with %q", ok, why, tt.want, tt.wantWhy)
			}
		})
	}
}

// freeTCPPort returns a loopback TCP port nothing listens on.
func freeTCPPort(t *testing.T) int {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := ln.Addr().(*net.TCPAddr).Port
	ln.Close()
	return port
}

func TestReconcileReadinessProbeDrivesReady(t *testing.T) {
	for _, c := range []corev1.Container{
		httpEcho, // a built-in workload
		{Image: "nicolaka/netshoot", Args: []string{"sleep", "3600"}}, // a host program
	} {
		t.Run(c.Image, func(t *testing.T) {
			tk := newTestKubelet(t)
			// Never probed during the test: the verdict is set by hand.
			c.ReadinessProbe = &corev1.Probe{InitialDelaySeconds: 3600,
				ProbeHandler: corev1.ProbeHandler{Exec: &corev1.ExecAction{Command: []string{"true"}}}}
			tk.apply(t, reconcilePod("p", "u1", corev1.RestartPolicyAlways, c))
			tk.sync(t, "default/p")
			if got := tk.status(t, "default", "p"); !strings.Contains(got, "container c ready=false restarts=0 running") {
				t.Fatalf("before the first success:\n%s\nwant running, not ready", got)
			}
			cr := tk.runtime("default/p").containers[0]
			cr.readiness.verdict.Store(true)
			tk.sync(t, "default/p")
			if got := tk.status(t, "default", "p"); !strings.Contains(got, "container c ready=true restarts=0 running") {
				t.Fatalf("after success:\n%s\nwant ready", got)
			}
			cr.readiness.verdict.Store(false)
			tk.sync(t, "default/p")
			if got := tk.status(t, "default", "p"); !strings.Contains(got, "container c ready=false restarts=0 running") {
				t.Fatalf("after failures:\n%s\nwant not ready", got)
			}
		})
	}
}
