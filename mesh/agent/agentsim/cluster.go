package agentsim

import (
	"context"
	"errors"
	"fmt"
	"math"
	"net/netip"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/kilofed/kilofed/mesh/k8s"
	"github.com/kilofed/kilofed/mesh/topology"
)

// Layout places node i of a simulated cluster: its name, location and
// addresses.
type Layout struct {
	// Locations is how many locations the nodes are spread over, round
	// robin; at least 1.
	Locations int
	// Kubelet gives each Node the status a kubelet writes besides its
	// addresses (KubeletStatus), so that the agents' Node caches hold what
	// they hold in a real cluster.
	Kubelet bool
}

func (l Layout) locations() int { return max(l.Locations, 1) }

// NodeName is node i's name.
func NodeName(i int) string { return fmt.Sprintf("node-%04d", i) }

// LocationName is the name of location j.
func LocationName(j int) string { return fmt.Sprintf("loc-%02d", j) }

// Location is node i's location.
func (l Layout) Location(i int) string { return LocationName(i % l.locations()) }

// LocationNames lists every location.
func (l Layout) LocationNames() []string {
	out := make([]string, l.locations())
	for j := range out {
		out[j] = LocationName(j)
	}
	return out
}

// InternalIP is node i's address on its location's LAN, 172.(16+j).0.0/16
// for location j (up to 16 locations).
func (l Layout) InternalIP(i int) netip.Prefix {
	j, host := i%l.locations(), i/l.locations()+10
	return netip.PrefixFrom(netip.AddrFrom4([4]byte{172, byte(16 + j%16), byte(host >> 8), byte(host)}), 16)
}

// ExternalIP is node i's public address, in the benchmarking range
// 198.18.0.0/15.
func ExternalIP(i int) netip.Addr {
	n := uint32(198)<<24 | uint32(18)<<16 + uint32(i) + 1
	return netip.AddrFrom4([4]byte{byte(n >> 24), byte(n >> 16), byte(n >> 8), byte(n)})
}

// Endpoint is the host:port node i's agent publishes.
func Endpoint(i int) string { return netip.AddrPortFrom(ExternalIP(i), topology.DefaultPort).String() }

// PodCIDR is node i's pod range, 10.32.0.0/11 cut in /24s.
func PodCIDR(i int) netip.Prefix {
	n := uint32(10)<<24 | uint32(32)<<16 + uint32(i)<<8
	return netip.PrefixFrom(netip.AddrFrom4([4]byte{byte(n >> 24), byte(n >> 16), byte(n >> 8), 0}), 24)
}

// NodeObject is Node i as its kubelet registers it: a location label and a
// pod range. annotations, when not nil, are set too.
func (l Layout) NodeObject(i int, annotations map[string]string) *corev1.Node {
	return &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{
			Name:        NodeName(i),
			Labels:      map[string]string{k8s.DefaultTopologyLabel: l.Location(i), "kubernetes.io/hostname": NodeName(i)},
			Annotations: annotations,
		},
		Spec: corev1.NodeSpec{PodCIDR: PodCIDR(i).String(), PodCIDRs: []string{PodCIDR(i).String()}},
	}
}

// topologyNode is node i as its agent would publish it.
func (l Layout) topologyNode(i int) topology.Node {
	return topology.Node{
		Name: NodeName(i), Location: l.Location(i), Key: PrivateKey(NodeName(i)).PublicKey(),
		InternalIP: l.InternalIP(i),
		PodCIDRs:   []netip.Prefix{PodCIDR(i)}, Ready: true,
	}
}

// Published returns the annotations the agents of nodes [0, n) publish,
// by node index (with the WireGuard IP of their segment, as the topology
// of the whole cluster assigns it), for nodes that are API objects only.
func (l Layout) Published(n int, opts topology.Options) ([]map[string]string, error) {
	nodes := make([]topology.Node, n)
	for i := range nodes {
		nodes[i] = l.topologyNode(i)
	}
	topo, err := topology.New(nodes, nil, opts)
	if err != nil {
		return nil, err
	}
	out := make([]map[string]string, n)
	for i, nd := range nodes {
		pub := k8s.NodeAnnotations{Key: nd.Key, Endpoint: Endpoint(i), InternalIP: nd.InternalIP, Granularity: topo.Options().Granularity}
		if s, ok := topo.Segment(nd.Name); ok {
			pub.WireGuardIP = s.WireGuardIP
		}
		if out[i], err = pub.Values(); err != nil {
			return nil, err
		}
		for k, v := range out[i] {
			if v == "" {
				delete(out[i], k)
			}
		}
	}
	return out, nil
}

// CreateNodes creates Node i for each i in idx, with annotations[i] when
// annotations is not nil, a few at a time.
func (l Layout) CreateNodes(ctx context.Context, kube kubernetes.Interface, idx []int, annotations []map[string]string) error {
	return parallel(ctx, len(idx), 16, func(k int) error {
		i := idx[k]
		var a map[string]string
		if annotations != nil {
			a = annotations[i]
		}
		n, err := kube.CoreV1().Nodes().Create(ctx, l.NodeObject(i, a), metav1.CreateOptions{})
		if err != nil || !l.Kubelet {
			return err
		}
		n.Status = l.KubeletStatus(i)
		_, err = kube.CoreV1().Nodes().UpdateStatus(ctx, n, metav1.UpdateOptions{FieldManager: "kubelet"})
		return err
	})
}

// KubeletStatus is the status the kubelet of node i writes: its
// conditions (Ready), addresses, capacity, system info and 40 container
// images of two names each, about 10 KB of JSON as on a busy node.
func (l Layout) KubeletStatus(i int) corev1.NodeStatus {
	now := metav1.Now()
	res := corev1.ResourceList{
		corev1.ResourceCPU: resource.MustParse("8"), corev1.ResourceMemory: resource.MustParse("32863740Ki"),
		corev1.ResourcePods: resource.MustParse("110"), corev1.ResourceEphemeralStorage: resource.MustParse("101430960Ki"),
		"hugepages-1Gi": resource.MustParse("0"), "hugepages-2Mi": resource.MustParse("0"),
	}
	st := corev1.NodeStatus{
		Capacity: res, Allocatable: res.DeepCopy(),
		Addresses: []corev1.NodeAddress{
			{Type: corev1.NodeInternalIP, Address: l.InternalIP(i).Addr().String()},
			{Type: corev1.NodeHostName, Address: NodeName(i)},
		},
		DaemonEndpoints: corev1.NodeDaemonEndpoints{KubeletEndpoint: corev1.DaemonEndpoint{Port: 10250}},
		NodeInfo: corev1.NodeSystemInfo{
			MachineID: fmt.Sprintf("%032x", i), SystemUUID: fmt.Sprintf("ec2%029x", i), BootID: fmt.Sprintf("%08x-0000-4000-8000-%012x", i, i),
			KernelVersion: "6.12.48+deb13-cloud-amd64", OSImage: "Debian GNU/Linux 13 (trixie)",
			ContainerRuntimeVersion: "containerd://2.1.4", KubeletVersion: "v1.37.2",
			OperatingSystem: "linux", Architecture: "amd64",
		},
	}
	for _, c := range []struct {
		t              corev1.NodeConditionType
		s              corev1.ConditionStatus
		reason, detail string
	}{
		{corev1.NodeMemoryPressure, corev1.ConditionFalse, "KubeletHasSufficientMemory", "kubelet has sufficient memory available"},
		{corev1.NodeDiskPressure, corev1.ConditionFalse, "KubeletHasNoDiskPressure", "kubelet has no disk pressure"},
		{corev1.NodePIDPressure, corev1.ConditionFalse, "KubeletHasSufficientPID", "kubelet has sufficient PID available"},
		{corev1.NodeReady, corev1.ConditionTrue, "KubeletReady", "kubelet is posting ready status"},
	} {
		st.Conditions = append(st.Conditions, corev1.NodeCondition{Type: c.t, Status: c.s, Reason: c.reason, Message: c.detail,
			LastHeartbeatTime: now, LastTransitionTime: now})
	}
	for k := range 40 {
		repo := fmt.Sprintf("registry.example.com/team-%02d/service-%02d", k%7, k)
		st.Images = append(st.Images, corev1.ContainerImage{
			Names:     []string{fmt.Sprintf("%s@sha256:%064x", repo, k*7919+1), repo + ":v1." + strconv.Itoa(k)},
			SizeBytes: int64(20+k*3) << 20,
		})
	}
	return st
}

// parallel runs f(0..n-1) on up to width goroutines and joins the errors.
func parallel(ctx context.Context, n, width int, f func(int) error) error {
	var (
		mu   sync.Mutex
		errs []error
		wg   sync.WaitGroup
		next atomic.Int64
	)
	for range min(width, n) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				k := int(next.Add(1) - 1)
				if k >= n || ctx.Err() != nil {
					return
				}
				if err := f(k); err != nil {
					mu.Lock()
					errs = append(errs, err)
					mu.Unlock()
				}
			}
		}()
	}
	wg.Wait()
	return errors.Join(append(errs, ctx.Err())...)
}

// Writer stands in for the agents of nodes that are API objects only: it
// renews the Leases their agents would (each node's heartbeat Lease with
// --leader-election=node-leases, CreateLeases; each location's election
// Lease, held by one of them, with --leader-election=location,
// CreateLocationLeases), and churns their Nodes. It is a plain client with
// no rate limit and no informer, so that it costs the measured process and
// the API server little beyond the writes themselves.
type Writer struct {
	kube      kubernetes.Interface
	namespace string
	duration  time.Duration
	nodes     []int
	mu        sync.Mutex
	// slots are the Leases it renews.
	slots []*leaseSlot

	// Renewals and Churned count the Lease renewals and Node updates done;
	// Errors the failed writes; Late the renewals skipped because the
	// previous ones had not returned yet (the API server is behind).
	Renewals, Churned, Errors, Late atomic.Int64
}

// leaseSlot is one Lease the Writer renews as its holder would.
type leaseSlot struct {
	name, holder string
	// lease is the Lease as last written (guarded by Writer.mu); nil when
	// it must be read again.
	lease *coordinationv1.Lease
}

// NewWriter returns a Writer for Nodes idx, whose Leases last duration
// (zero: k8s.DefaultLeaseDuration), over a client of its own.
func NewWriter(cfg *rest.Config, idx []int, duration time.Duration) (*Writer, error) {
	rc := rest.CopyConfig(cfg)
	rc.QPS, rc.Burst = -1, 0
	rc.UserAgent = "agentsim-writer"
	rc.ContentType = "application/vnd.kubernetes.protobuf"
	kube, err := kubernetes.NewForConfig(rc)
	if err != nil {
		return nil, err
	}
	if duration <= 0 {
		duration = k8s.DefaultLeaseDuration
	}
	return &Writer{kube: kube, namespace: k8s.DefaultLeaseNamespace, duration: duration, nodes: idx}, nil
}

// CreateLeases creates the nodes' heartbeat Leases, owned by their Nodes,
// as their agents' first heartbeat does with --leader-election=node-leases.
func (w *Writer) CreateLeases(ctx context.Context) error {
	slots := make([]*leaseSlot, len(w.nodes))
	err := parallel(ctx, len(w.nodes), 16, func(k int) error {
		i := w.nodes[k]
		n, err := w.kube.CoreV1().Nodes().Get(ctx, NodeName(i), metav1.GetOptions{})
		if err != nil {
			return err
		}
		l := &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{
			Name: k8s.LeaseName(n.Name), Namespace: w.namespace, Labels: map[string]string{k8s.LeaseLabel: "true"},
			OwnerReferences: []metav1.OwnerReference{{APIVersion: "v1", Kind: "Node", Name: n.Name, UID: n.UID}},
		}}
		w.renew(l, n.Name)
		out, err := w.kube.CoordinationV1().Leases(w.namespace).Create(ctx, l, metav1.CreateOptions{FieldManager: k8s.FieldManager})
		if err != nil {
			return err
		}
		slots[k] = &leaseSlot{name: out.Name, holder: n.Name, lease: out}
		return nil
	})
	w.addSlots(slots)
	return err
}

// CreateLocationLeases makes the cluster one that runs
// --leader-election=location, led by the Writer's nodes: for every
// location of l that has one of them, the first of them (in the Writer's
// order) leads it, as its agent does once elected: it holds the
// location's election Lease (k8s.LocationLeaseName, created at term 0 as
// a first election creates it) and publishes kilofed.io/leads with that
// term on its Node. It returns the leaders by location; RenewLeases then
// renews their Leases. No heartbeat Lease is written.
func (w *Writer) CreateLocationLeases(ctx context.Context, l Layout) (map[string]string, error) {
	leaders := map[string]string{}
	for _, i := range w.nodes {
		if loc := l.Location(i); leaders[loc] == "" {
			leaders[loc] = NodeName(i)
		}
	}
	var slots []*leaseSlot
	api := w.kube.CoordinationV1().Leases(w.namespace)
	for _, loc := range l.LocationNames() {
		leader, ok := leaders[loc]
		if !ok {
			continue
		}
		name := k8s.LocationLeaseName(loc)
		// The label's value is the sanitized location, the part of the
		// name between the prefix and the hash ("-" and 8 hex digits).
		label := name[len(k8s.LocationLeasePrefix) : len(name)-9]
		term := int32(0)
		le := &coordinationv1.Lease{
			ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: w.namespace, Labels: map[string]string{k8s.ElectionLabel: label}},
			Spec:       coordinationv1.LeaseSpec{LeaseTransitions: &term},
		}
		w.renew(le, leader)
		out, err := api.Create(ctx, le, metav1.CreateOptions{FieldManager: k8s.FieldManager})
		if err != nil {
			return nil, err
		}
		v := k8s.Leads{Term: *out.Spec.LeaseTransitions, Location: loc}.String()
		patch := fmt.Appendf(nil, `{"metadata":{"annotations":{%q:%q}}}`, k8s.LeadsAnnotation, v)
		if _, err := w.kube.CoreV1().Nodes().Patch(ctx, leader, types.MergePatchType, patch, metav1.PatchOptions{FieldManager: k8s.FieldManager}); err != nil {
			return nil, err
		}
		slots = append(slots, &leaseSlot{name: name, holder: leader, lease: out})
	}
	w.addSlots(slots)
	return leaders, nil
}

func (w *Writer) addSlots(slots []*leaseSlot) {
	w.mu.Lock()
	defer w.mu.Unlock()
	for _, s := range slots {
		if s != nil {
			w.slots = append(w.slots, s)
		}
	}
}

// renew makes holder the holder of l, renewed now (a Lease it holds
// already keeps its term and acquire time).
func (w *Writer) renew(l *coordinationv1.Lease, holder string) {
	now := metav1.NewMicroTime(time.Now())
	secs := int32(math.Ceil(w.duration.Seconds()))
	l.Spec.HolderIdentity, l.Spec.LeaseDurationSeconds, l.Spec.RenewTime = &holder, &secs, &now
	if l.Spec.AcquireTime == nil {
		l.Spec.AcquireTime = &now
	}
}

// RenewLeases renews every Lease created so far once per period, spread
// evenly over the period, until ctx ends.
func (w *Writer) RenewLeases(ctx context.Context, period time.Duration) {
	const slot = 10 * time.Millisecond
	w.mu.Lock()
	slots := slices.Clone(w.slots)
	w.mu.Unlock()
	if len(slots) == 0 {
		return
	}
	work := make(chan *leaseSlot, len(slots))
	var wg sync.WaitGroup
	for range min(64, len(slots)) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for s := range work {
				w.renewOne(ctx, s)
			}
		}()
	}
	defer wg.Wait()
	defer close(work)
	t := time.NewTicker(slot)
	defer t.Stop()
	start, sent := time.Now(), 0
	for {
		select {
		case <-ctx.Done():
			return
		case now := <-t.C:
			due := int(float64(len(slots)) * float64(now.Sub(start)) / float64(period))
			for ; sent < due; sent++ {
				select {
				case work <- slots[sent%len(slots)]:
				default: // the API server is behind: skip, as a late agent would
					w.Late.Add(1)
				}
			}
		}
	}
}

// renewOne renews s's Lease, conditional on the version last written, as
// its holder's agent does; after a conflict it reads the Lease again.
func (w *Writer) renewOne(ctx context.Context, s *leaseSlot) {
	w.mu.Lock()
	l := s.lease
	w.mu.Unlock()
	api := w.kube.CoordinationV1().Leases(w.namespace)
	var err error
	if l != nil {
		l = l.DeepCopy()
		w.renew(l, s.holder)
		l, err = api.Update(ctx, l, metav1.UpdateOptions{FieldManager: k8s.FieldManager})
	}
	if l == nil || apierrors.IsConflict(err) {
		l, err = api.Get(ctx, s.name, metav1.GetOptions{})
		if err == nil {
			w.renew(l, s.holder)
			l, err = api.Update(ctx, l, metav1.UpdateOptions{FieldManager: k8s.FieldManager})
		}
	}
	if err != nil {
		if ctx.Err() == nil {
			w.Errors.Add(1)
		}
		l = nil
	} else {
		w.Renewals.Add(1)
	}
	w.mu.Lock()
	s.lease = l
	w.mu.Unlock()
}

// Churn updates rate Nodes per second until ctx ends, round robin: each
// update flips the node's kilo.squat.ai/persistent-keepalive between 0 and
// 25, a change every agent reads and reconciles.
func (w *Writer) Churn(ctx context.Context, rate float64) {
	t := time.NewTicker(time.Duration(float64(time.Second) / rate))
	defer t.Stop()
	for k := 0; ; k++ {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		i := w.nodes[k%len(w.nodes)]
		ka := strconv.Itoa(25 * ((k/len(w.nodes))%2 ^ 1))
		patch := fmt.Appendf(nil, `{"metadata":{"annotations":{%q:%q}}}`, k8s.PersistentKeepaliveAnnotation, ka)
		if _, err := w.kube.CoreV1().Nodes().Patch(ctx, NodeName(i), types.MergePatchType, patch, metav1.PatchOptions{}); err != nil {
			if ctx.Err() == nil {
				w.Errors.Add(1)
			}
			continue
		}
		w.Churned.Add(1)
	}
}
