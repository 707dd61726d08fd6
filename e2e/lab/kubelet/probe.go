package kubelet

import (
	"context"
	"crypto/tls"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
)

// probeKind tells what a probe drives.
type probeKind string

const (
	readinessProbe probeKind = "readiness"
	livenessProbe  probeKind = "liveness"
)

// probeSettings are a probe's timings and thresholds with the API defaults
// filled in.
type probeSettings struct {
	initialDelay, period, timeout time.Duration
	success, failure              int32
}

// settingsOf returns the timings and thresholds of p.
func settingsOf(p *corev1.Probe) probeSettings {
	s := probeSettings{
		initialDelay: time.Duration(p.InitialDelaySeconds) * time.Second,
		period:       time.Duration(p.PeriodSeconds) * time.Second,
		timeout:      time.Duration(p.TimeoutSeconds) * time.Second,
		success:      p.SuccessThreshold,
		failure:      p.FailureThreshold,
	}
	if s.period <= 0 {
		s.period = 10 * time.Second
	}
	if s.timeout <= 0 {
		s.timeout = time.Second
	}
	if s.success <= 0 {
		s.success = 1
	}
	if s.failure <= 0 {
		s.failure = 3
	}
	return s
}

// probeState counts consecutive results and holds the probe's verdict: a
// readiness probe starts failing and turns successful after `success`
// successes in a row, a liveness probe starts successful; either turns
// failing after `failure` failures in a row.
type probeState struct {
	settings         probeSettings
	result           bool
	successes, fails int32
}

// newProbeState returns the state before the first probe of kind.
func newProbeState(kind probeKind, s probeSettings) *probeState {
	if kind == livenessProbe {
		s.success = 1 // the API allows nothing else
	}
	return &probeState{settings: s, result: kind == livenessProbe}
}

// record adds the outcome of one probe and reports whether the verdict
// changed.
func (st *probeState) record(ok bool) bool {
	if ok {
		st.successes, st.fails = st.successes+1, 0
		if !st.result && st.successes >= st.settings.success {
			st.result = true
			return true
		}
		return false
	}
	st.fails, st.successes = st.fails+1, 0
	if st.result && st.fails >= st.settings.failure {
		st.result = false
		return true
	}
	return false
}

// probeTarget is where one run of a container is probed.
type probeTarget struct {
	netns  string // the pod's (hostNetwork: the node's)
	podIP  string // default host of httpGet and tcpSocket
	ports  []corev1.ContainerPort
	env    []string // of exec probes: the run's
	prefix []string // argv prefix of exec probes
}

// probeOnce runs one attempt of probe p against t within its timeout and
// reports success and, on failure, why.
func (k *kubelet) probeOnce(ctx context.Context, p *corev1.Probe, t probeTarget, timeout time.Duration) (bool, string) {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	switch {
	case p.Exec != nil:
		if len(p.Exec.Command) == 0 {
			return false, "exec probe without command"
		}
		code, err := k.runExec(ctx, execSpec{Argv: append(append([]string{}, t.prefix...), p.Exec.Command...), Env: t.env})
		if err != nil {
			return false, err.Error()
		}
		if ctx.Err() != nil {
			return false, fmt.Sprintf("timed out after %v", timeout)
		}
		if code != 0 {
			return false, fmt.Sprintf("exit code %d", code)
		}
		return true, ""
	case p.HTTPGet != nil:
		return k.probeHTTP(ctx, p.HTTPGet, t)
	case p.TCPSocket != nil:
		port, err := probePort(p.TCPSocket.Port, t.ports)
		if err != nil {
			return false, err.Error()
		}
		host := p.TCPSocket.Host
		if host == "" {
			host = t.podIP
		}
		conn, err := k.dialInNetns(ctx, t.netns, "tcp", net.JoinHostPort(host, strconv.Itoa(port)))
		if err != nil {
			return false, err.Error()
		}
		_ = conn.Close()
		return true, ""
	}
	// gRPC probes (and none at all) are not run: they pass.
	return true, ""
}

// probeHTTP runs one httpGet probe: success is a status from 200 to 399.
func (k *kubelet) probeHTTP(ctx context.Context, g *corev1.HTTPGetAction, t probeTarget) (bool, string) {
	port, err := probePort(g.Port, t.ports)
	if err != nil {
		return false, err.Error()
	}
	host := g.Host
	if host == "" {
		host = t.podIP
	}
	scheme := strings.ToLower(string(g.Scheme))
	if scheme == "" {
		scheme = "http"
	}
	path := g.Path
	if !strings.HasPrefix(path, "/") {
		path = "/" + path
	}
	u := &url.URL{Scheme: scheme, Host: net.JoinHostPort(host, strconv.Itoa(port))}
	u, err = u.Parse(path)
	if err != nil {
		return false, fmt.Sprintf("probe URL: %v", err)
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u.String(), nil)
	if err != nil {
		return false, err.Error()
	}
	req.Header.Set("User-Agent", "kube-probe/1.37")
	req.Header.Set("Accept", "*/*")
	for _, h := range g.HTTPHeaders {
		if strings.EqualFold(h.Name, "Host") {
			req.Host = h.Value
			continue
		}
		req.Header.Add(h.Name, h.Value)
	}
	tr := &http.Transport{
		DialContext: func(ctx context.Context, network, addr string) (net.Conn, error) {
			return k.dialInNetns(ctx, t.netns, network, addr)
		},
		TLSClientConfig:   &tls.Config{InsecureSkipVerify: true}, //nolint:gosec // a kubelet's probes do not verify either
		DisableKeepAlives: true,
	}
	defer tr.CloseIdleConnections()
	client := &http.Client{Transport: tr, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	resp, err := client.Do(req)
	if err != nil {
		return false, err.Error()
	}
	defer resp.Body.Close()
	if resp.StatusCode < 200 || resp.StatusCode >= 400 {
		return false, "HTTP probe failed with statuscode: " + strconv.Itoa(resp.StatusCode)
	}
	return true, ""
}

// probePort resolves a probe's port, a number or a container port's name.
func probePort(p intstr.IntOrString, ports []corev1.ContainerPort) (int, error) {
	if p.Type == intstr.Int {
		if p.IntVal <= 0 || p.IntVal > 65535 {
			return 0, fmt.Errorf("invalid probe port %d", p.IntVal)
		}
		return int(p.IntVal), nil
	}
	for _, cp := range ports {
		if cp.Name == p.StrVal {
			return int(cp.ContainerPort), nil
		}
	}
	if n, err := strconv.Atoi(p.StrVal); err == nil && n > 0 && n <= 65535 {
		return n, nil
	}
	return 0, fmt.Errorf("probe port %q is not a container port's name", p.StrVal)
}

// prober probes one run of a container until the run ends.
type prober struct {
	kind     probeKind
	probe    *corev1.Probe
	target   probeTarget
	state    *probeState
	verdict  atomic.Bool // the state's result, for the reconcile
	onChange func(ok bool, why string)
}

// newProber returns the prober of one run; nil when p is nil.
func newProber(kind probeKind, p *corev1.Probe, t probeTarget, onChange func(bool, string)) *prober {
	if p == nil {
		return nil
	}
	pr := &prober{kind: kind, probe: p, target: t, state: newProbeState(kind, settingsOf(p)), onChange: onChange}
	pr.verdict.Store(pr.state.result)
	return pr
}

// run probes after the initial delay, then every period, until done closes.
func (k *kubelet) runProber(pr *prober, done <-chan struct{}) {
	s := pr.state.settings
	ctx, cancel := context.WithCancel(k.runCtx)
	defer cancel()
	go func() {
		select {
		case <-done:
		case <-ctx.Done():
		}
		cancel()
	}()
	wait := time.NewTimer(s.initialDelay)
	defer wait.Stop()
	select {
	case <-ctx.Done():
		return
	case <-wait.C:
	}
	tick := time.NewTicker(s.period)
	defer tick.Stop()
	for {
		ok, why := k.probeOnce(ctx, pr.probe, pr.target, s.timeout)
		if ctx.Err() != nil {
			return
		}
		if pr.state.record(ok) {
			pr.verdict.Store(pr.state.result)
			pr.onChange(pr.state.result, why)
		}
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
	}
}
