//go:build linux

package kubelet

import (
	"bytes"
	"context"
	"crypto/tls"
	"errors"
	"io"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
	"time"

	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/remotecommand"
	clientexec "k8s.io/client-go/util/exec"
)

// execClient serves tk's kubelet API over TLS that checks client
// certificates, and returns a client config with the API server's
// kubelet client identity.
func execClient(t *testing.T, tk *testKubelet) *rest.Config {
	t.Helper()
	pki := newTestPKI(t)
	srv := httptest.NewUnstartedServer(tk.apiHandler())
	srv.TLS = &tls.Config{
		Certificates: []tls.Certificate{pki.servingCert(t)},
		ClientAuth:   tls.RequireAndVerifyClientCert,
		ClientCAs:    pki.pool,
	}
	srv.StartTLS()
	t.Cleanup(srv.Close)
	certPEM, keyPEM := pki.issue(t, "kube-apiserver-kubelet-client", []string{"system:masters"})
	return &rest.Config{Host: srv.URL, TLSClientConfig: rest.TLSClientConfig{CAData: pki.caPEM, CertData: certPEM, KeyData: keyPEM}}
}

// execURL is the kubelet URL of an exec of argv into default/web.
func execURL(host string, argv []string, stdin, tty bool) *url.URL {
	q := url.Values{"command": argv, "output": {"1"}}
	if !tty {
		q.Set("error", "1")
	}
	if stdin {
		q.Set("input", "1")
	}
	if tty {
		q.Set("tty", "1")
	}
	u, _ := url.Parse(host + "/exec/default/web/c?" + q.Encode())
	return u
}

func TestExecProtocols(t *testing.T) {
	tests := []struct {
		name       string
		argv       []string
		stdin      string // "" for no stdin
		tty        bool
		wantOut    string
		wantErrOut string
		wantCode   int    // exit code of the command
		wantErr    string // a failure that is not an exit code
	}{
		{name: "output, error output and exit code", argv: []string{"sh", "-c", "echo out; echo err >&2; exit 3"},
			wantOut: "out\n", wantErrOut: "err\n", wantCode: 3},
		{name: "success", argv: []string{"true"}},
		{name: "container env, no kubelet env", argv: []string{"sh", "-c", `echo "$GREETING|$HOSTNAME|$FROM_SECRET|$` + workloadEnv + `|$PATH"`},
			wantOut: "ni hao|web|||" + execPath + "\n"},
		{name: "killed by a signal", argv: []string{"sh", "-c", "kill -9 $$"}, wantCode: 137},
		{name: "unknown command", argv: []string{"no-such-command-kfl"}, wantErr: `exec: "no-such-command-kfl": executable file not found in $PATH`},
		{name: "stdin", argv: []string{"sh", "-c", "tr a-z A-Z; echo done"}, stdin: "ping\n", wantOut: "PING\ndone\n"},
		{name: "terminal", argv: []string{"sh", "-c", "test -t 0 && test -t 1 && echo tty:$TERM"}, tty: true, wantOut: "tty:xterm\r\n"},
	}
	tk := apiTestKubelet(t)
	cfg := execClient(t, tk)
	protocols := []struct {
		name string
		new  func(u *url.URL) (remotecommand.Executor, error)
	}{
		{name: "SPDY (what the API server sends)", new: func(u *url.URL) (remotecommand.Executor, error) {
			return remotecommand.NewSPDYExecutor(cfg, "POST", u)
		}},
		{name: "WebSocket v4", new: func(u *url.URL) (remotecommand.Executor, error) {
			return remotecommand.NewWebSocketExecutorForProtocols(cfg, "GET", u.String(), "v4.channel.k8s.io")
		}},
	}
	for _, proto := range protocols {
		for _, tt := range tests {
			if tt.stdin != "" && strings.HasPrefix(proto.name, "WebSocket") {
				continue // v4 WebSocket cannot close stdin: only v5 can
			}
			t.Run(proto.name+"/"+tt.name, func(t *testing.T) {
				ex, err := proto.new(execURL(cfg.Host, tt.argv, tt.stdin != "", tt.tty))
				if err != nil {
					t.Fatal(err)
				}
				ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
				defer cancel()
				var out, errOut bytes.Buffer
				opts := remotecommand.StreamOptions{Stdout: &out, Tty: tt.tty}
				if !tt.tty {
					opts.Stderr = &errOut
				}
				if tt.stdin != "" {
					opts.Stdin = strings.NewReader(tt.stdin)
				}
				err = ex.StreamWithContext(ctx, opts)
				var exitErr clientexec.CodeExitError
				switch {
				case tt.wantErr != "":
					if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
						t.Fatalf("exec error %v, want %q", err, tt.wantErr)
					}
				case tt.wantCode != 0:
					if !errors.As(err, &exitErr) || exitErr.Code != tt.wantCode {
						t.Fatalf("exec error %v, want exit code %d", err, tt.wantCode)
					}
				case err != nil:
					t.Fatalf("exec: %v", err)
				}
				if out.String() != tt.wantOut || errOut.String() != tt.wantErrOut {
					t.Errorf("stdout %q stderr %q, want %q %q", out.String(), errOut.String(), tt.wantOut, tt.wantErrOut)
				}
			})
		}
	}
}

func TestExecKilledWhenPodIsTornDown(t *testing.T) {
	tk := apiTestKubelet(t)
	cfg := execClient(t, tk)
	ex, err := remotecommand.NewSPDYExecutor(cfg, "POST", execURL(cfg.Host, []string{"sh", "-c", "echo started; exec sleep 600"}, false, false))
	if err != nil {
		t.Fatal(err)
	}
	started := make(chan struct{})
	out := &signalWriter{first: started}
	res := make(chan error, 1)
	go func() {
		res <- ex.StreamWithContext(context.Background(), remotecommand.StreamOptions{Stdout: out, Stderr: io.Discard})
	}()
	select {
	case <-started:
	case <-time.After(30 * time.Second):
		t.Fatal("the command did not start")
	}
	tk.teardownAll()
	select {
	case err := <-res:
		var exitErr clientexec.CodeExitError
		if !errors.As(err, &exitErr) || exitErr.Code != 137 {
			t.Errorf("exec ended with %v, want exit code 137 (SIGKILL)", err)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("the exec'd command outlived its pod")
	}
}

// signalWriter closes first on its first write.
type signalWriter struct {
	first chan struct{}
	once  bool
}

func (w *signalWriter) Write(p []byte) (int, error) {
	if !w.once {
		w.once = true
		close(w.first)
	}
	return len(p), nil
}
