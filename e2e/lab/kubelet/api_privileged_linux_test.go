//go:build linux

package kubelet

import (
	"context"
	"crypto/tls"
	"errors"
	"io"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/remotecommand"
	clientexec "k8s.io/client-go/util/exec"
)

// apiClient talks to the kubelet API of a privileged test as the API
// server would.
type apiClient struct {
	serving *ServingConfig
	rest    *rest.Config
	http    *http.Client
}

// newAPIClient returns a serving config on 127.0.0.1 and a client with a
// system:masters certificate of the same CA.
func newAPIClient(t *testing.T) *apiClient {
	t.Helper()
	s := testServing(t)
	pki := newTestPKI(t)
	s.ClientCAs = pki.pool
	s.Certificate = pki.servingCert(t)
	certPEM, keyPEM := pki.issue(t, "kube-apiserver-kubelet-client", []string{"system:masters"})
	cfg := &rest.Config{Host: "https://" + s.Listener.Addr().String(),
		TLSClientConfig: rest.TLSClientConfig{CAData: pki.caPEM, CertData: certPEM, KeyData: keyPEM}}
	pair, err := tls.X509KeyPair(certPEM, keyPEM)
	if err != nil {
		t.Fatal(err)
	}
	hc := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{
		TLSClientConfig: &tls.Config{RootCAs: pki.pool, Certificates: []tls.Certificate{pair}}}}
	return &apiClient{serving: s, rest: cfg, http: hc}
}

// apiExec execs argv and returns its combined output and exit code, or -1
// and the error when the exec failed otherwise.
type apiExec func(argv ...string) (string, int)

// check runs fn with an exec into ns/pod, checks /healthz, and that the
// container's logs hold wantLog.
func (a *apiClient) check(t *testing.T, ns, pod string, fn func(apiExec), wantLog string) {
	t.Helper()
	ex := func(argv ...string) (string, int) {
		q := url.Values{"command": argv, "output": {"1"}, "error": {"1"}}
		u, _ := url.Parse(a.rest.Host + "/exec/" + ns + "/" + pod + "/c?" + q.Encode())
		e, err := remotecommand.NewSPDYExecutor(a.rest, "POST", u)
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		var out strings.Builder
		err = e.StreamWithContext(ctx, remotecommand.StreamOptions{Stdout: &out, Stderr: &out})
		var exitErr clientexec.CodeExitError
		switch {
		case err == nil:
			return out.String(), 0
		case errors.As(err, &exitErr):
			return out.String(), exitErr.Code
		default:
			return err.Error(), -1
		}
	}
	fn(ex)
	get := func(path string) string {
		resp, err := a.http.Get(a.rest.Host + path)
		if err != nil {
			t.Fatalf("GET %s: %v", path, err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		if resp.StatusCode != http.StatusOK {
			t.Errorf("GET %s = %s %q", path, resp.Status, b)
		}
		return string(b)
	}
	if got := get("/healthz"); got != "ok" {
		t.Errorf("healthz = %q", got)
	}
	if got := get("/containerLogs/" + ns + "/" + pod + "/c"); !strings.Contains(got, wantLog) {
		t.Errorf("logs of %s/%s = %q, want %q in them", ns, pod, got, wantLog)
	}
}
