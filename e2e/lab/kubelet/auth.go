package kubelet

import (
	"context"
	"crypto/tls"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"sync"
	"time"

	authzv1 "k8s.io/api/authorization/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
)

// How long SubjectAccessReview answers are reused, as a real kubelet's
// webhook authorizer does by default.
const (
	authzAllowTTL = 5 * time.Minute
	authzDenyTTL  = 30 * time.Second
)

// userInfo is an authenticated client of the kubelet API.
type userInfo struct {
	Name   string
	Groups []string
}

// userFromTLS returns the user of a verified client certificate: its
// common name, its organizations as groups plus system:authenticated.
func userFromTLS(st *tls.ConnectionState) (userInfo, bool) {
	if st == nil || len(st.VerifiedChains) == 0 || len(st.VerifiedChains[0]) == 0 {
		return userInfo{}, false
	}
	cert := st.VerifiedChains[0][0]
	if cert.Subject.CommonName == "" {
		return userInfo{}, false
	}
	groups := append(slices.Clone(cert.Subject.Organization), "system:authenticated")
	return userInfo{Name: cert.Subject.CommonName, Groups: groups}, true
}

// requestAttributes returns the verb and the node subresources a request
// needs (any one of them allowed suffices), as a real kubelet maps them:
// the HTTP method gives the verb; /healthz needs nodes/healthz (or
// nodes/proxy), every path served here otherwise nodes/proxy.
func requestAttributes(method, path string) (verb string, subresources []string) {
	switch method {
	case http.MethodPost:
		verb = "create"
	case http.MethodGet, http.MethodHead:
		verb = "get"
	case http.MethodPut:
		verb = "update"
	case http.MethodPatch:
		verb = "patch"
	case http.MethodDelete:
		verb = "delete"
	default:
		verb = strings.ToLower(method)
	}
	if isSubpath(path, "/healthz") {
		return verb, []string{"healthz", "proxy"}
	}
	return verb, []string{"proxy"}
}

// isSubpath reports whether path is prefix or below it.
func isSubpath(path, prefix string) bool {
	return path == prefix || strings.HasPrefix(path, prefix+"/")
}

// authorizer decides whether a user may make a request to the kubelet API.
type authorizer interface {
	// authorize reports whether u may do verb on one of the node's
	// subresources, with the reason given by the authority.
	authorize(ctx context.Context, u userInfo, verb string, subresources []string) (bool, string, error)
}

// sarAuthorizer asks the API server with SubjectAccessReviews and caches
// the answers.
type sarAuthorizer struct {
	client kubernetes.Interface
	node   string
	now    func() time.Time

	mu    sync.Mutex
	cache map[string]sarAnswer
}

// sarAnswer is a cached SubjectAccessReview answer.
type sarAnswer struct {
	allowed bool
	reason  string
	expires time.Time
}

// newSARAuthorizer returns an authorizer for the kubelet of node.
func newSARAuthorizer(client kubernetes.Interface, node string) *sarAuthorizer {
	return &sarAuthorizer{client: client, node: node, now: time.Now, cache: map[string]sarAnswer{}}
}

// authorize implements authorizer.
func (a *sarAuthorizer) authorize(ctx context.Context, u userInfo, verb string, subresources []string) (bool, string, error) {
	var reasons []string
	for _, sub := range subresources {
		allowed, reason, err := a.review(ctx, u, verb, sub)
		if err != nil {
			return false, "", err
		}
		if allowed {
			return true, reason, nil
		}
		if reason != "" {
			reasons = append(reasons, reason)
		}
	}
	return false, strings.Join(reasons, "; "), nil
}

// review answers one (user, verb, subresource) from the cache or a
// SubjectAccessReview.
func (a *sarAuthorizer) review(ctx context.Context, u userInfo, verb, sub string) (bool, string, error) {
	key := strings.Join([]string{u.Name, strings.Join(u.Groups, ","), verb, sub}, "\x00")
	now := a.now()
	a.mu.Lock()
	c, ok := a.cache[key]
	a.mu.Unlock()
	if ok && now.Before(c.expires) {
		return c.allowed, c.reason, nil
	}
	sar := &authzv1.SubjectAccessReview{Spec: authzv1.SubjectAccessReviewSpec{
		User:   u.Name,
		Groups: u.Groups,
		ResourceAttributes: &authzv1.ResourceAttributes{
			Verb: verb, Version: "v1", Resource: "nodes", Subresource: sub, Name: a.node,
		},
	}}
	got, err := a.client.AuthorizationV1().SubjectAccessReviews().Create(ctx, sar, metav1.CreateOptions{})
	if err != nil {
		return false, "", fmt.Errorf("subject access review of %s %s nodes/%s: %w", u.Name, verb, sub, err)
	}
	c = sarAnswer{allowed: got.Status.Allowed, reason: got.Status.Reason, expires: now.Add(authzDenyTTL)}
	if c.allowed {
		c.expires = now.Add(authzAllowTTL)
	}
	a.mu.Lock()
	a.cache[key] = c
	a.mu.Unlock()
	return c.allowed, c.reason, nil
}
