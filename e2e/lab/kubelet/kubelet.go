package kubelet

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/netip"
	"os"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/workqueue"
)

// Timings of the stand-in.
const (
	leaseRenewInterval  = 10 * time.Second
	statusPostInterval  = 30 * time.Second
	podCIDRPollInterval = 500 * time.Millisecond
	readyPollInterval   = 100 * time.Millisecond
	workers             = 2
)

// kubelet is the state of one Run.
type kubelet struct {
	cfg      Config
	log      *slog.Logger
	nodeInfo corev1.NodeSystemInfo
	now      func() time.Time
	after    func(time.Duration) <-chan time.Time // timers of token renewals
	net      podNetwork
	start    func(processSpec) (*process, error)
	logDir   string
	rootDir  string         // Config.RootDir or a temporary one
	allocs   []*ipAllocator // IPv4 first
	store    cache.Store
	queue    workqueue.TypedRateLimitingInterface[string]
	// runCtx is Run's context: pods' exec contexts derive from it.
	runCtx context.Context

	// The kubelet API (Config.Serving).
	authz      authorizer
	execPrefix func(netns string) []string // argv prefix entering a pod's netns
	runExec    func(context.Context, execSpec) (int, error)
	// dialInNetns connects from inside a named netns (probes).
	dialInNetns func(ctx context.Context, netns, network, addr string) (net.Conn, error)
	execMu      sync.Mutex
	execClosed  bool
	execWG      sync.WaitGroup // exec sessions

	mu   sync.Mutex
	pods map[string]*podRuntime // by namespace/name
}

// Run registers the node described by cfg, keeps its Lease and Ready
// condition fresh, and runs every Pod bound to it (spec.nodeName) in its own
// network namespace until ctx ends. Then it stops every workload and removes
// every pod namespace, veth, route and file it created (the API objects
// stay) and returns nil. It returns an error when cfg is invalid or the node
// cannot be registered.
func Run(ctx context.Context, cfg Config) error {
	cfg, err := cfg.validate()
	if err != nil {
		return err
	}
	if cfg.Serving != nil {
		defer cfg.Serving.Listener.Close() // also when Run fails before serving
	}
	k := &kubelet{
		cfg:         cfg,
		log:         cfg.Logger,
		now:         time.Now,
		after:       time.After,
		net:         newPodNetwork(cfg.Logger),
		pods:        map[string]*podRuntime{},
		runCtx:      ctx,
		authz:       newSARAuthorizer(cfg.Client, cfg.NodeName),
		execPrefix:  netnsExecPrefix,
		runExec:     runCommand,
		dialInNetns: dialNetns,
	}
	k.nodeInfo = nodeSystemInfo(cfg, randomID(), kernelVersion())
	if err := k.openLogDir(); err != nil {
		return err
	}
	defer k.closeLogDir()
	if err := k.openRootDir(); err != nil {
		return err
	}
	defer k.closeRootDir()
	starter := newLockedStarter(startProcess)
	defer starter.Close() // after every pod was torn down
	k.start = starter.Start

	if err := k.registerWithRetry(ctx); err != nil {
		return err
	}
	var bg sync.WaitGroup
	defer bg.Wait()
	bg.Go(func() { k.heartbeat(ctx) })

	cidrs, err := k.waitPodCIDRs(ctx)
	if err != nil {
		return err
	}
	for _, p := range cidrs {
		a, err := newIPAllocator(p)
		if err != nil {
			return fmt.Errorf("node %s: %w", cfg.NodeName, err)
		}
		k.allocs = append(k.allocs, a)
	}
	k.log.Info("node registered", "podCIDRs", cidrs, "internalIP", cfg.InternalIP, "netns", cfg.NodeNetns)
	return k.runPods(ctx)
}

// registerWithRetry registers the node, retrying transient errors (API
// server still starting) until ctx ends.
func (k *kubelet) registerWithRetry(ctx context.Context) error {
	backoff := 200 * time.Millisecond
	for {
		err := k.registerNode(ctx)
		if err == nil {
			return nil
		}
		if errors.Is(err, ErrInvalidConfig) || apierrors.IsInvalid(err) || apierrors.IsForbidden(err) ||
			apierrors.IsUnauthorized(err) || apierrors.IsBadRequest(err) {
			return err
		}
		k.log.Warn("node registration failed, retrying", "err", err, "in", backoff)
		select {
		case <-ctx.Done():
			return fmt.Errorf("register node %s: %w (last error: %w)", k.cfg.NodeName, ctx.Err(), err)
		case <-time.After(backoff):
		}
		backoff = min(2*backoff, 5*time.Second)
	}
}

// waitPodCIDRs returns the configured podCIDRs or waits until
// kube-controller-manager has allocated some to the Node.
func (k *kubelet) waitPodCIDRs(ctx context.Context) ([]netip.Prefix, error) {
	if len(k.cfg.PodCIDRs) > 0 {
		return podCIDRsByFamily(k.cfg.PodCIDRs)
	}
	logged := false
	for {
		cidrs, err := k.nodePodCIDRs(ctx)
		if err == nil && len(cidrs) > 0 {
			return cidrs, nil
		}
		if !logged || err != nil {
			k.log.Info("waiting for kube-controller-manager to allocate the node's podCIDRs", "err", err)
			logged = true
		}
		select {
		case <-ctx.Done():
			return nil, fmt.Errorf("node %s got no podCIDRs (is kube-controller-manager running with --allocate-node-cidrs?): %w",
				k.cfg.NodeName, ctx.Err())
		case <-time.After(podCIDRPollInterval):
		}
	}
}

// heartbeat renews the Lease every 10 s and posts the node status every
// 30 s until ctx ends; it registers the Node again if someone deleted it.
func (k *kubelet) heartbeat(ctx context.Context) {
	if err := k.renewLease(ctx); err != nil {
		k.log.Warn("lease renewal failed", "err", err)
	}
	lease := time.NewTicker(leaseRenewInterval)
	defer lease.Stop()
	status := time.NewTicker(statusPostInterval)
	defer status.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-lease.C:
			if err := k.renewLease(ctx); err != nil && ctx.Err() == nil {
				k.log.Warn("lease renewal failed", "err", err)
			}
		case <-status.C:
			err := k.postNodeStatus(ctx)
			if apierrors.IsNotFound(err) {
				k.log.Warn("node object is gone, registering it again")
				err = k.registerNode(ctx)
			}
			if err != nil && ctx.Err() == nil {
				k.log.Warn("node status update failed", "err", err)
			}
		}
	}
}

// runPods watches the pods bound to the node and reconciles them until ctx
// ends, then tears every pod down.
func (k *kubelet) runPods(ctx context.Context) error {
	factory := informers.NewSharedInformerFactoryWithOptions(k.cfg.Client, 0,
		informers.WithTweakListOptions(func(o *metav1.ListOptions) {
			o.FieldSelector = fields.OneTermEqualSelector("spec.nodeName", k.cfg.NodeName).String()
		}))
	informer := factory.Core().V1().Pods().Informer()
	k.store = informer.GetStore()
	k.queue = workqueue.NewTypedRateLimitingQueueWithConfig(
		workqueue.NewTypedItemExponentialFailureRateLimiter[string](100*time.Millisecond, 30*time.Second),
		workqueue.TypedRateLimitingQueueConfig[string]{Name: "kubelet-" + k.cfg.NodeName})
	enqueue := func(obj any) {
		if key, err := cache.DeletionHandlingMetaNamespaceKeyFunc(obj); err == nil {
			k.queue.Add(key)
		}
	}
	if _, err := informer.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    enqueue,
		UpdateFunc: func(_, obj any) { enqueue(obj) },
		DeleteFunc: enqueue,
	}); err != nil {
		return fmt.Errorf("watch pods of node %s: %w", k.cfg.NodeName, err)
	}
	factory.Start(ctx.Done())
	defer factory.Shutdown()
	var api sync.WaitGroup
	if k.cfg.Serving != nil {
		api.Go(func() { k.serveAPI(ctx) })
	}

	var wg sync.WaitGroup
	for range workers {
		wg.Go(func() {
			for k.processNext(ctx) {
			}
		})
	}
	<-ctx.Done()
	k.queue.ShutDown()
	wg.Wait()
	k.teardownAll()
	k.closeExecs()
	api.Wait()
	return nil
}

// processNext reconciles one queued pod; it returns false once the queue is
// shut down.
func (k *kubelet) processNext(ctx context.Context) bool {
	key, shutdown := k.queue.Get()
	if shutdown {
		return false
	}
	defer k.queue.Done(key)
	if ctx.Err() != nil {
		return true
	}
	if err := k.reconcile(ctx, key); err != nil {
		k.log.Warn("pod sync failed, retrying", "pod", key, "err", err)
		k.queue.AddRateLimited(key)
		return true
	}
	k.queue.Forget(key)
	return true
}

// openLogDir creates the workload log folder.
func (k *kubelet) openLogDir() error {
	if k.cfg.LogDir != "" {
		if err := os.MkdirAll(k.cfg.LogDir, 0o755); err != nil {
			return fmt.Errorf("create workload log folder: %w", err)
		}
		k.logDir = k.cfg.LogDir
		return nil
	}
	dir, err := os.MkdirTemp("", "kfl-kubelet-"+k.cfg.NodeName+"-")
	if err != nil {
		return fmt.Errorf("create workload log folder: %w", err)
	}
	k.logDir = dir
	return nil
}

// closeLogDir removes the log folder if Run created it.
func (k *kubelet) closeLogDir() {
	if k.cfg.LogDir == "" && k.logDir != "" {
		if err := os.RemoveAll(k.logDir); err != nil {
			k.log.Warn("remove workload log folder", "dir", k.logDir, "err", err)
		}
	}
}

// randomID returns 16 random bytes in hex (the node's boot ID).
func randomID() string {
	b := make([]byte, 16)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

// openRootDir creates the folder of the node's pod volumes and hostPaths.
func (k *kubelet) openRootDir() error {
	if k.cfg.RootDir != "" {
		k.rootDir = k.cfg.RootDir
		return os.MkdirAll(k.rootDir, 0o755)
	}
	dir, err := os.MkdirTemp("", "kfl-kubelet-root-"+k.cfg.NodeName+"-")
	if err != nil {
		return fmt.Errorf("create the node's root folder: %w", err)
	}
	k.rootDir = dir
	return nil
}

// closeRootDir removes the root folder if Run created it.
func (k *kubelet) closeRootDir() {
	if k.cfg.RootDir == "" && k.rootDir != "" {
		if err := os.RemoveAll(k.rootDir); err != nil {
			k.log.Warn("remove the node's root folder", "dir", k.rootDir, "err", err)
		}
	}
}
