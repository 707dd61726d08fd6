package kubelet

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"errors"
	"fmt"
	"net/http"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	authzv1 "k8s.io/api/authorization/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
)

// allowAll authorizes every request.
type allowAll struct{}

func (allowAll) authorize(context.Context, userInfo, string, []string) (bool, string, error) {
	return true, "", nil
}

func TestRequestAttributes(t *testing.T) {
	tests := []struct {
		name, method, path string
		wantVerb           string
		wantSub            []string
	}{
		{name: "exec over SPDY is a POST", method: http.MethodPost, path: "/exec/default/p/c", wantVerb: "create", wantSub: []string{"proxy"}},
		{name: "exec over WebSocket is a GET", method: http.MethodGet, path: "/exec/default/p/uid/c", wantVerb: "get", wantSub: []string{"proxy"}},
		{name: "logs", method: http.MethodGet, path: "/containerLogs/default/p/c", wantVerb: "get", wantSub: []string{"proxy"}},
		{name: "healthz tries healthz then proxy", method: http.MethodGet, path: "/healthz", wantVerb: "get", wantSub: []string{"healthz", "proxy"}},
		{name: "below healthz", method: http.MethodGet, path: "/healthz/ping", wantVerb: "get", wantSub: []string{"healthz", "proxy"}},
		{name: "healthzfoo is not healthz", method: http.MethodGet, path: "/healthzfoo", wantVerb: "get", wantSub: []string{"proxy"}},
		{name: "delete", method: http.MethodDelete, path: "/x", wantVerb: "delete", wantSub: []string{"proxy"}},
		{name: "put", method: http.MethodPut, path: "/x", wantVerb: "update", wantSub: []string{"proxy"}},
		{name: "patch", method: http.MethodPatch, path: "/x", wantVerb: "patch", wantSub: []string{"proxy"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			verb, sub := requestAttributes(tt.method, tt.path)
			if verb != tt.wantVerb {
				t.Errorf("verb = %q, want %q", verb, tt.wantVerb)
			}
			if diff := cmp.Diff(tt.wantSub, sub); diff != "" {
				t.Errorf("subresources (-want +got):\n%s", diff)
			}
		})
	}
}

func TestUserFromTLS(t *testing.T) {
	cert := func(cn string, orgs ...string) *x509.Certificate {
		return &x509.Certificate{Subject: pkix.Name{CommonName: cn, Organization: orgs}}
	}
	tests := []struct {
		name   string
		state  *tls.ConnectionState
		want   userInfo
		wantOK bool
	}{
		{name: "plain HTTP", state: nil},
		{name: "no verified chain", state: &tls.ConnectionState{PeerCertificates: []*x509.Certificate{cert("x")}}},
		{name: "API server's kubelet client", wantOK: true,
			state: &tls.ConnectionState{VerifiedChains: [][]*x509.Certificate{{cert("kube-apiserver-kubelet-client", "system:masters")}}},
			want:  userInfo{Name: "kube-apiserver-kubelet-client", Groups: []string{"system:masters", "system:authenticated"}}},
		{name: "no common name", state: &tls.ConnectionState{VerifiedChains: [][]*x509.Certificate{{cert("", "g")}}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, ok := userFromTLS(tt.state)
			if ok != tt.wantOK {
				t.Fatalf("ok = %v, want %v", ok, tt.wantOK)
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("user (-want +got):\n%s", diff)
			}
		})
	}
}

// sarClient returns a fake clientset whose SubjectAccessReviews allow the
// group system:masters and user "healthz-only" on nodes/healthz of node-a,
// and count the reviews.
func sarClient(calls *atomic.Int32, fail error) *fake.Clientset {
	c := fake.NewClientset()
	c.PrependReactor("create", "subjectaccessreviews", func(a k8stesting.Action) (bool, runtime.Object, error) {
		calls.Add(1)
		if fail != nil {
			return true, nil, fail
		}
		sar := a.(k8stesting.CreateAction).GetObject().(*authzv1.SubjectAccessReview).DeepCopy()
		ra := sar.Spec.ResourceAttributes
		if ra == nil || ra.Resource != "nodes" || ra.Name != "node-a" || ra.Version != "v1" {
			return true, nil, fmt.Errorf("unexpected review %+v", sar.Spec)
		}
		for _, g := range sar.Spec.Groups {
			if g == "system:masters" {
				sar.Status.Allowed = true
			}
		}
		if sar.Spec.User == "healthz-only" && ra.Subresource == "healthz" {
			sar.Status.Allowed = true
		}
		if !sar.Status.Allowed {
			sar.Status.Reason = "no RBAC policy matched"
		}
		return true, sar, nil
	})
	return c
}

func TestSARAuthorizer(t *testing.T) {
	masters := userInfo{Name: "kube-apiserver-kubelet-client", Groups: []string{"system:masters", "system:authenticated"}}
	healthzOnly := userInfo{Name: "healthz-only", Groups: []string{"system:authenticated"}}
	nobody := userInfo{Name: "nobody", Groups: []string{"system:authenticated"}}
	tests := []struct {
		name        string
		user        userInfo
		method      string
		path        string
		wantAllowed bool
		wantReason  string
		wantCalls   int32 // reviews for two identical requests
	}{
		{name: "masters may exec, answer cached", user: masters, method: http.MethodPost, path: "/exec/default/p/c", wantAllowed: true, wantCalls: 1},
		{name: "healthz through nodes/healthz", user: healthzOnly, method: http.MethodGet, path: "/healthz", wantAllowed: true, wantCalls: 1},
		{name: "no exec with healthz only", user: healthzOnly, method: http.MethodPost, path: "/exec/default/p/c",
			wantReason: "no RBAC policy matched", wantCalls: 1},
		{name: "nobody: both subresources asked, denial cached", user: nobody, method: http.MethodGet, path: "/healthz",
			wantReason: "no RBAC policy matched; no RBAC policy matched", wantCalls: 2},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var calls atomic.Int32
			a := newSARAuthorizer(sarClient(&calls, nil), "node-a")
			verb, sub := requestAttributes(tt.method, tt.path)
			for range 2 {
				allowed, reason, err := a.authorize(context.Background(), tt.user, verb, sub)
				if err != nil {
					t.Fatal(err)
				}
				if allowed != tt.wantAllowed || reason != tt.wantReason {
					t.Errorf("authorize = %v %q, want %v %q", allowed, reason, tt.wantAllowed, tt.wantReason)
				}
			}
			if got := calls.Load(); got != tt.wantCalls {
				t.Errorf("%d reviews, want %d", got, tt.wantCalls)
			}
		})
	}
}

func TestSARAuthorizerExpiryAndErrors(t *testing.T) {
	var calls atomic.Int32
	a := newSARAuthorizer(sarClient(&calls, nil), "node-a")
	now := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	a.now = func() time.Time { return now }
	u := userInfo{Name: "nobody"}
	ask := func() {
		if _, _, err := a.authorize(context.Background(), u, "get", []string{"proxy"}); err != nil {
			t.Fatal(err)
		}
	}
	ask()
	now = now.Add(authzDenyTTL - time.Second)
	ask()
	if got := calls.Load(); got != 1 {
		t.Errorf("%d reviews within the deny TTL, want 1", got)
	}
	now = now.Add(2 * time.Second)
	ask()
	if got := calls.Load(); got != 2 {
		t.Errorf("%d reviews after the deny TTL, want 2", got)
	}

	boom := errors.New("api down")
	b := newSARAuthorizer(sarClient(&calls, boom), "node-a")
	if _, _, err := b.authorize(context.Background(), u, "get", []string{"proxy"}); !errors.Is(err, boom) {
		t.Errorf("authorize with a failing API = %v, want %v", err, boom)
	}
}
