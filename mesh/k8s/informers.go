package k8s

import (
	"errors"
	"fmt"
	"reflect"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/serializer"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"

	"github.com/kilofed/kilofed/mesh/apis/kilo/v1alpha1"
)

// peerScheme knows the Peer types, for the Peer REST client.
var peerScheme = func() *runtime.Scheme {
	s := runtime.NewScheme()
	if err := v1alpha1.AddToScheme(s); err != nil {
		panic(err)
	}
	return s
}()

// newPeerREST returns a REST client for kilo.squat.ai/v1alpha1.
func newPeerREST(cfg *rest.Config) (rest.Interface, error) {
	c := rest.CopyConfig(cfg)
	c.GroupVersion = &v1alpha1.SchemeGroupVersion
	c.APIPath = "/apis"
	c.ContentType = runtime.ContentTypeJSON
	c.NegotiatedSerializer = serializer.NewCodecFactory(peerScheme).WithoutConversion()
	if c.UserAgent == "" {
		c.UserAgent = rest.DefaultKubernetesUserAgent()
	}
	rc, err := rest.RESTClientFor(c)
	if err != nil {
		return nil, fmt.Errorf("peer client: %w", err)
	}
	return rc, nil
}

// checkPeerCRD returns ErrNoPeerCRD, with how to install it, when the API
// server does not serve Peers.
func checkPeerCRD(kube kubernetes.Interface) error {
	const fix = "install it with `kubectl apply -f mesh/config/crd/kilo.squat.ai_peers.yaml` (or the kilofed chart)"
	list, err := kube.Discovery().ServerResourcesForGroupVersion(v1alpha1.SchemeGroupVersion.String())
	if apierrors.IsNotFound(err) {
		return fmt.Errorf("%w: %s", ErrNoPeerCRD, fix)
	}
	if err != nil {
		return fmt.Errorf("discover %s: %w", v1alpha1.SchemeGroupVersion, err)
	}
	for _, r := range list.APIResources {
		if r.Name == v1alpha1.PeerPlural {
			return nil
		}
	}
	return fmt.Errorf("%w: %s", ErrNoPeerCRD, fix)
}

// slimNode is the Node cache's transform: of each Node it keeps what the
// agent reads (metadata, spec, status addresses and the Ready condition)
// and drops the rest, the managed fields and the kubelet's status (images,
// capacity, system info, volumes): several KB per Node that every agent of
// a large cluster would hold for nothing. Other objects pass unchanged.
func slimNode(obj any) (any, error) {
	n, ok := obj.(*corev1.Node)
	if !ok {
		return obj, nil
	}
	n.ManagedFields = nil
	var ready []corev1.NodeCondition
	for _, c := range n.Status.Conditions {
		if c.Type == corev1.NodeReady {
			ready = []corev1.NodeCondition{c}
			break
		}
	}
	n.Status = corev1.NodeStatus{Addresses: n.Status.Addresses, Conditions: ready}
	return n, nil
}

// addHandlers wires the informers to the change signal and the Lease tracker.
func (c *Client) addHandlers(leaseInformer cache.SharedIndexInformer) error {
	_, errN := c.nodes.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc: func(any) { c.signal() },
		UpdateFunc: func(old, obj any) {
			if c.nodeChanged(old, obj) {
				c.signal()
			}
		},
		DeleteFunc: func(any) { c.signal() },
	})
	_, errP := c.peers.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc: func(any) { c.signal() },
		UpdateFunc: func(old, obj any) {
			if peerChanged(old, obj) {
				c.signal()
			}
		},
		DeleteFunc: func(any) { c.signal() },
	})
	if leaseInformer == nil {
		return errors.Join(errN, errP)
	}
	_, errL := leaseInformer.AddEventHandler(cache.ResourceEventHandlerDetailedFuncs{
		// A renewal of a fresh lease changes nothing: only a lease turning
		// fresh is checked at once; expiries are found by watchReadiness.
		AddFunc: func(obj any, initial bool) {
			if l, ok := obj.(*coordinationv1.Lease); ok && c.leases.observe(l, c.now(), initial, c.cfg.LeaseDuration) {
				c.checkReadiness()
			}
		},
		UpdateFunc: func(_, obj any) {
			if l, ok := obj.(*coordinationv1.Lease); ok && c.leases.observe(l, c.now(), false, c.cfg.LeaseDuration) {
				c.checkReadiness()
			}
		},
		DeleteFunc: func(obj any) {
			if t, ok := obj.(cache.DeletedFinalStateUnknown); ok {
				obj = t.Obj
			}
			if l, ok := obj.(*coordinationv1.Lease); ok {
				c.leases.forget(l)
				c.checkReadiness()
			}
		},
	})
	if err := errors.Join(errN, errP, errL); err != nil {
		return fmt.Errorf("add informer handlers: %w", err)
	}
	return nil
}

// nodeChanged reports whether an update changes what NodeFromObject reads
// or the node's key rotation request, so that kubelet status heartbeats do not wake the agent.
func (c *Client) nodeChanged(old, obj any) bool {
	o, ok1 := old.(*corev1.Node)
	n, ok2 := obj.(*corev1.Node)
	if !ok1 || !ok2 {
		return true
	}
	on, oerrs := NodeFromObject(o, c.opts)
	nn, nerrs := NodeFromObject(n, c.opts)
	if o.Annotations[RotateKeyRequestAnnotation] != n.Annotations[RotateKeyRequestAnnotation] ||
		o.Annotations[LeadsAnnotation] != n.Annotations[LeadsAnnotation] {
		return true
	}
	return !reflect.DeepEqual(on, nn) || fmt.Sprint(oerrs) != fmt.Sprint(nerrs)
}

// peerChanged reports whether an update changes what PeerFromObject reads,
// so that status writes do not wake the agent.
func peerChanged(old, obj any) bool {
	o, ok1 := old.(*v1alpha1.Peer)
	n, ok2 := obj.(*v1alpha1.Peer)
	if !ok1 || !ok2 {
		return true
	}
	op, oerr := PeerFromObject(o)
	np, nerr := PeerFromObject(n)
	return !reflect.DeepEqual(op, np) || fmt.Sprint(oerr) != fmt.Sprint(nerr)
}
