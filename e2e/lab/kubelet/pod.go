package kubelet

import (
	"context"
	"fmt"
	"net/netip"
	"path/filepath"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/retry"
	"k8s.io/utils/ptr"
)

// podRuntime is what the kubelet runs for one pod.
type podRuntime struct {
	key, namespace, name string
	uid                  types.UID
	pod                  *corev1.Pod // as last seen; containers' environment comes from it
	sandbox              sandboxSpec
	owner                string // netns claim owner
	hostIPs              []netip.Addr
	startTime            time.Time
	containers           []*containerRuntime
	// finished is set once every container ended for good; the sandbox is
	// gone then, and the runtime only remembers not to start the pod again.
	finished   bool
	written    *corev1.PodStatus  // last status written
	volumes    volumeSet          // made by the first container that mounts them
	stopTokens context.CancelFunc // ends the token renewal
	// execCtx ends (stopExec) when the pod finishes or is torn down:
	// commands exec'd into it are killed then.
	execCtx  context.Context
	stopExec context.CancelFunc
}

// container returns the container named name, or nil; safe from any
// goroutine (the list does not change after startPod).
func (rt *podRuntime) container(name string) *containerRuntime {
	for _, c := range rt.containers {
		if c.name == name {
			return c
		}
	}
	return nil
}

// reconcile brings the pod namespace/name (key) to its desired state:
// running while it exists and is bound here, torn down otherwise.
func (k *kubelet) reconcile(ctx context.Context, key string) error {
	obj, exists, err := k.store.GetByKey(key)
	if err != nil {
		return fmt.Errorf("read pod %s from cache: %w", key, err)
	}
	rt := k.runtime(key)
	pod, _ := obj.(*corev1.Pod)
	if !exists || pod == nil || pod.Spec.NodeName != k.cfg.NodeName {
		if rt != nil {
			k.teardown(rt, "pod deleted")
		}
		return nil
	}
	if rt != nil && rt.uid != pod.UID {
		k.teardown(rt, "pod replaced")
		rt = nil
	}
	if pod.DeletionTimestamp != nil {
		if rt != nil {
			k.teardown(rt, "pod terminating")
		}
		return k.deletePod(ctx, pod)
	}
	if rt == nil {
		if pod.Status.Phase == corev1.PodSucceeded || pod.Status.Phase == corev1.PodFailed {
			return nil // finished before this Run
		}
		if rt, err = k.startPod(pod); err != nil {
			return err
		}
	}
	return k.syncPod(ctx, pod, rt)
}

// runtime returns the runtime of key, or nil.
func (k *kubelet) runtime(key string) *podRuntime {
	k.mu.Lock()
	defer k.mu.Unlock()
	return k.pods[key]
}

// startPod creates the pod's sandbox and starts its containers.
func (k *kubelet) startPod(pod *corev1.Pod) (*podRuntime, error) {
	key := pod.Namespace + "/" + pod.Name
	rt := &podRuntime{
		key: key, namespace: pod.Namespace, name: pod.Name, uid: pod.UID, pod: pod,
		owner:     fmt.Sprintf("cluster %q node %q pod %s uid %s", k.cfg.Cluster, k.cfg.NodeName, key, pod.UID),
		startTime: k.now(),
		hostIPs:   k.hostIPs(),
	}
	rt.execCtx, rt.stopExec = context.WithCancel(k.runCtx)
	if pod.Spec.HostNetwork {
		rt.sandbox = sandboxSpec{HostNetwork: true, Netns: k.cfg.NodeNetns, NodeNetns: k.cfg.NodeNetns, IPs: rt.hostIPs}
	} else {
		s, err := k.newSandbox(pod, rt.owner)
		if err != nil {
			rt.stopExec()
			return nil, err
		}
		rt.sandbox = s
	}
	for _, c := range pod.Spec.Containers {
		cr := &containerRuntime{name: c.Name, image: c.Image, spec: c}
		if img, ok := hostImage(c.Image, k.cfg.ImageBinDir); ok {
			cr.host = &img
		} else {
			cr.plan = planFor(c)
			cr.readyFile = filepath.Join(k.logDir, fmt.Sprintf("%s_%s_%s_%s.ready", pod.Namespace, pod.Name, shortUID(pod.UID), c.Name))
		}
		k.startContainer(rt, cr)
		rt.containers = append(rt.containers, cr)
	}
	k.mu.Lock()
	k.pods[key] = rt
	k.mu.Unlock()
	k.log.Info("pod started", "pod", key, "netns", rt.sandbox.Netns, "ips", rt.sandbox.IPs)
	return rt, nil
}

// hostIPs returns the node's InternalIP(s), IPv4 first.
func (k *kubelet) hostIPs() []netip.Addr {
	ips := []netip.Addr{k.cfg.InternalIP}
	if k.cfg.InternalIP6.IsValid() {
		ips = append(ips, k.cfg.InternalIP6)
	}
	return ips
}

// newSandbox claims the pod's netns name, allocates its IPs and creates its
// network namespace.
func (k *kubelet) newSandbox(pod *corev1.Pod, owner string) (sandboxSpec, error) {
	s := sandboxSpec{
		Netns:     PodNetns(k.cfg.NodeNetns, pod.Namespace, pod.Name),
		NodeNetns: k.cfg.NodeNetns,
		HostVeth:  hostVethName(pod.Namespace, pod.Name),
		MTU:       k.cfg.MTU,
	}
	if k.cfg.ClusterDNS.IsValid() {
		s.ResolvConf = resolvConf(k.cfg.ClusterDNS, pod.Namespace, k.cfg.ClusterDomain)
	}
	if err := claimNetns(s.Netns, owner); err != nil {
		return s, err
	}
	for _, a := range k.allocs {
		ip, err := a.Allocate(owner)
		if err != nil {
			k.releaseSandbox(s, owner)
			return s, err
		}
		s.IPs = append(s.IPs, ip)
	}
	if err := k.net.Setup(s); err != nil {
		k.releaseSandbox(s, owner)
		return s, fmt.Errorf("create network of pod %s/%s: %w", pod.Namespace, pod.Name, err)
	}
	return s, nil
}

// releaseSandbox gives back the IPs and netns name of a sandbox.
func (k *kubelet) releaseSandbox(s sandboxSpec, owner string) {
	for _, ip := range s.IPs {
		for _, a := range k.allocs {
			if a.prefix.Contains(ip) {
				a.Release(ip)
			}
		}
	}
	releaseNetns(s.Netns, owner)
}

// resolvConf returns the resolv.conf of a pod in namespace ns.
func resolvConf(dns netip.Addr, ns, domain string) string {
	return fmt.Sprintf("nameserver %s\nsearch %s.svc.%s svc.%s %s\noptions ndots:5\n", dns, ns, domain, domain, domain)
}

// syncPod advances the containers of a running pod (exits, restarts,
// readiness) and writes the pod status when it changed.
func (k *kubelet) syncPod(ctx context.Context, pod *corev1.Pod, rt *podRuntime) error {
	rt.pod = pod
	if !rt.finished {
		var wakeIn time.Duration
		for _, c := range rt.containers {
			if d := k.syncContainer(rt, c, pod.Spec.RestartPolicy); d > 0 && (wakeIn == 0 || d < wakeIn) {
				wakeIn = d
			}
		}
		if wakeIn > 0 {
			k.queue.AddAfter(rt.key, wakeIn)
		}
	}
	snap := rt.snapshot()
	if ph := snap.phase(); (ph == corev1.PodSucceeded || ph == corev1.PodFailed) && !rt.finished {
		rt.stopExec()
		k.removeSandbox(rt)
		k.removeVolumes(rt)
		rt.finished = true
		k.log.Info("pod finished", "pod", rt.key, "phase", snap.phase())
	}
	prev := pod.Status
	if rt.written != nil {
		prev = *rt.written
	}
	status := podStatus(pod, prev, snap, metav1.NewTime(k.now()))
	if rt.written != nil && apiequality.Semantic.DeepEqual(status, *rt.written) {
		return nil
	}
	if err := k.writeStatus(ctx, pod, status); err != nil {
		return err
	}
	rt.written = &status
	return nil
}

// writeStatus writes status into the pod, re-reading it on conflicts.
func (k *kubelet) writeStatus(ctx context.Context, pod *corev1.Pod, status corev1.PodStatus) error {
	pods := k.cfg.Client.CoreV1().Pods(pod.Namespace)
	cur := pod.DeepCopy()
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		cur.Status = status
		_, err := pods.UpdateStatus(ctx, cur, metav1.UpdateOptions{})
		if apierrors.IsConflict(err) {
			fresh, gerr := pods.Get(ctx, pod.Name, metav1.GetOptions{})
			if gerr != nil {
				return gerr
			}
			if fresh.UID != pod.UID {
				return nil // replaced; the next sync handles the new pod
			}
			cur = fresh
		}
		return err
	})
	if apierrors.IsNotFound(err) {
		return nil // deleted meanwhile; the delete event tears it down
	}
	if err != nil {
		return fmt.Errorf("write status of pod %s/%s: %w", pod.Namespace, pod.Name, err)
	}
	return nil
}

// deletePod removes a terminating pod from the API once it is torn down.
func (k *kubelet) deletePod(ctx context.Context, pod *corev1.Pod) error {
	err := k.cfg.Client.CoreV1().Pods(pod.Namespace).Delete(ctx, pod.Name, metav1.DeleteOptions{
		GracePeriodSeconds: ptr.To[int64](0),
		Preconditions:      &metav1.Preconditions{UID: ptr.To(pod.UID)},
	})
	if err != nil && !apierrors.IsNotFound(err) && !apierrors.IsConflict(err) {
		return fmt.Errorf("delete terminated pod %s/%s: %w", pod.Namespace, pod.Name, err)
	}
	return nil
}

// teardown stops the containers of rt, removes its sandbox and forgets it.
func (k *kubelet) teardown(rt *podRuntime, why string) {
	rt.stopExec()
	var wg sync.WaitGroup
	for _, c := range rt.containers {
		wg.Go(func() { k.stopContainer(rt, c) })
	}
	wg.Wait()
	if !rt.finished {
		k.removeSandbox(rt)
		k.removeVolumes(rt)
	}
	k.mu.Lock()
	if k.pods[rt.key] == rt {
		delete(k.pods, rt.key)
	}
	k.mu.Unlock()
	k.log.Info("pod torn down", "pod", rt.key, "reason", why)
}

// removeSandbox deletes the pod's network and gives back its addresses.
func (k *kubelet) removeSandbox(rt *podRuntime) {
	if rt.sandbox.HostNetwork {
		return
	}
	if err := k.net.Teardown(rt.sandbox); err != nil {
		k.log.Error("pod network teardown incomplete", "pod", rt.key, "netns", rt.sandbox.Netns, "err", err)
	}
	k.releaseSandbox(rt.sandbox, rt.owner)
}

// teardownAll tears every pod down (at the end of Run).
func (k *kubelet) teardownAll() {
	k.mu.Lock()
	all := make([]*podRuntime, 0, len(k.pods))
	for _, rt := range k.pods {
		all = append(all, rt)
	}
	k.mu.Unlock()
	var wg sync.WaitGroup
	for _, rt := range all {
		wg.Go(func() { k.teardown(rt, "kubelet stopping") })
	}
	wg.Wait()
}

// shortUID returns the first 8 characters of a UID.
func shortUID(uid types.UID) string {
	s := string(uid)
	if len(s) > 8 {
		s = s[:8]
	}
	return s
}

// netnsClaims records which pod owns each pod netns name in this process,
// so that two lab clusters with a pod of the same namespace/name do not
// share (and later delete) one namespace.
var netnsClaims = struct {
	sync.Mutex
	owner map[string]string
}{owner: map[string]string{}}

// claimNetns reserves name for owner.
func claimNetns(name, owner string) error {
	netnsClaims.Lock()
	defer netnsClaims.Unlock()
	if o, ok := netnsClaims.owner[name]; ok && o != owner {
		return fmt.Errorf("%w: %s is held by %s: pods of the same namespace/name in two lab clusters share a netns name; rename one of them",
			ErrNetnsInUse, name, o)
	}
	netnsClaims.owner[name] = owner
	return nil
}

// releaseNetns gives name back if owner holds it.
func releaseNetns(name, owner string) {
	netnsClaims.Lock()
	defer netnsClaims.Unlock()
	if netnsClaims.owner[name] == owner {
		delete(netnsClaims.owner, name)
	}
}
