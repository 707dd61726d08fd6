package kubelet

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/netip"
	"os"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/workqueue"
)

// fakeNetwork records Setup and Teardown as text.
type fakeNetwork struct {
	mu  sync.Mutex
	log []string
}

func (f *fakeNetwork) Setup(s sandboxSpec) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.log = append(f.log, fmt.Sprintf("setup %s veth %s ips %v", s.Netns, s.HostVeth, s.IPs))
	return nil
}

func (f *fakeNetwork) Teardown(s sandboxSpec) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.log = append(f.log, "teardown "+s.Netns)
	return nil
}

func (f *fakeNetwork) take() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	l := f.log
	f.log = nil
	return l
}

// fakeProcs starts no process: it records the argv, creates the ready file
// as a workload would once listening, and lets the test end a run.
type fakeProcs struct {
	mu    sync.Mutex
	argv  [][]string
	env   [][]string
	dir   []string
	procs []*process
}

func (f *fakeProcs) start(spec processSpec) (*process, error) {
	if i := slices.Index(spec.Argv, "--ready-file"); i >= 0 {
		if err := os.WriteFile(spec.Argv[i+1], nil, 0o644); err != nil {
			return nil, err
		}
	}
	p := &process{done: make(chan struct{})} // pid 0: stop() does not signal
	f.mu.Lock()
	defer f.mu.Unlock()
	f.argv = append(f.argv, spec.Argv)
	f.env = append(f.env, spec.Env)
	f.dir = append(f.dir, spec.Dir)
	f.procs = append(f.procs, p)
	return p, nil
}

// exit ends the latest run with code.
func (f *fakeProcs) exit(code int32, at time.Time) {
	f.mu.Lock()
	p := f.procs[len(f.procs)-1]
	f.mu.Unlock()
	p.exitCode, p.finishedAt = code, at
	close(p.done)
}

// testKubelet is a kubelet over a fake clientset, network and processes.
type testKubelet struct {
	*kubelet
	net   *fakeNetwork
	procs *fakeProcs
	clock time.Time
}

func newTestKubelet(t *testing.T) *testKubelet {
	t.Helper()
	tk := &testKubelet{net: &fakeNetwork{}, procs: &fakeProcs{}, clock: time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)}
	alloc, err := newIPAllocator(netip.MustParsePrefix("10.42.0.0/24"))
	if err != nil {
		t.Fatal(err)
	}
	client := fake.NewClientset(&corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "kube-root-ca.crt"},
		Data: map[string]string{"ca.crt": "test CA\n"}})
	client.PrependReactor("create", "serviceaccounts", func(a k8stesting.Action) (bool, runtime.Object, error) {
		if a.GetSubresource() != "token" {
			return false, nil, nil
		}
		tr := a.(k8stesting.CreateAction).GetObject().(*authenticationv1.TokenRequest).DeepCopy()
		ref := tr.Spec.BoundObjectRef
		tr.Status = authenticationv1.TokenRequestStatus{Token: "token-of-" + a.GetNamespace() + "/" + ref.Name,
			ExpirationTimestamp: metav1.NewTime(tk.clock.Add(time.Duration(*tr.Spec.ExpirationSeconds) * time.Second))}
		return true, tr, nil
	})
	tk.kubelet = &kubelet{
		cfg: Config{Client: client, Cluster: "paris", NodeName: "node-a", NodeNetns: "kfl-node-a",
			InternalIP: netip.MustParseAddr("10.0.1.10"), WorkloadCommand: []string{"/lab", "workload"}},
		log:     slog.New(slog.NewTextHandler(io.Discard, nil)),
		now:     func() time.Time { return tk.clock },
		after:   time.After,
		net:     tk.net,
		start:   tk.procs.start,
		logDir:  t.TempDir(),
		rootDir: t.TempDir(),
		allocs:  []*ipAllocator{alloc},
		store:   cache.NewStore(cache.MetaNamespaceKeyFunc),
		queue: workqueue.NewTypedRateLimitingQueue[string](
			workqueue.NewTypedItemExponentialFailureRateLimiter[string](time.Millisecond, time.Millisecond)),
		pods:       map[string]*podRuntime{},
		runCtx:     context.Background(),
		authz:      allowAll{},
		execPrefix: func(string) []string { return nil },
		runExec:    runCommand,
		dialInNetns: func(ctx context.Context, _, network, addr string) (net.Conn, error) {
			var d net.Dialer
			return d.DialContext(ctx, network, addr)
		},
	}
	t.Cleanup(tk.queue.ShutDown)
	t.Cleanup(tk.teardownAll) // releases the process-wide netns claims
	return tk
}

// apply puts pod into the API and the informer cache, then reconciles it.
func (tk *testKubelet) apply(t *testing.T, pod *corev1.Pod) {
	t.Helper()
	ctx := context.Background()
	pods := tk.cfg.Client.CoreV1().Pods(pod.Namespace)
	if _, err := pods.Get(ctx, pod.Name, metav1.GetOptions{}); apierrors.IsNotFound(err) {
		if _, err := pods.Create(ctx, pod, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	if err := tk.store.Update(pod); err != nil {
		t.Fatal(err)
	}
	tk.sync(t, pod.Namespace+"/"+pod.Name)
}

// sync reconciles key with the cache as it is.
func (tk *testKubelet) sync(t *testing.T, key string) {
	t.Helper()
	if err := tk.reconcile(context.Background(), key); err != nil {
		t.Fatalf("reconcile %s: %v", key, err)
	}
}

// status returns the phase and container lines of the pod's API status.
func (tk *testKubelet) status(t *testing.T, ns, name string) string {
	t.Helper()
	p, err := tk.cfg.Client.CoreV1().Pods(ns).Get(context.Background(), name, metav1.GetOptions{})
	if err != nil {
		return "error: " + err.Error()
	}
	var keep []string
	for _, l := range strings.Split(statusText(p.Status), "\n") {
		if strings.HasPrefix(l, "phase") || strings.HasPrefix(l, "container") || strings.HasPrefix(l, "podIP") {
			keep = append(keep, l)
		}
	}
	return strings.Join(keep, "\n")
}

func reconcilePod(name string, uid types.UID, policy corev1.RestartPolicy, c corev1.Container) *corev1.Pod {
	c.Name = "c"
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: name, UID: uid},
		Spec:       corev1.PodSpec{NodeName: "node-a", RestartPolicy: policy, Containers: []corev1.Container{c}},
	}
}
