package k8s

import (
	"context"
	"encoding/json"
	"fmt"
	"net/netip"
	"strings"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/kilofed/kilofed/mesh/topology"
	"github.com/kilofed/kilofed/mesh/topology/wgconf"
)

// FieldManager names this package's writes in managedFields.
const FieldManager = "kilofed-mesh"

// NodeAnnotations is what an agent publishes about its own node. A zero
// field removes its annotation.
type NodeAnnotations struct {
	// Key is the node's WireGuard public key (kilo.squat.ai/key).
	Key wgconf.Key
	// Endpoint is "host:port" when the agent knows a better endpoint than
	// the Node's addresses (its --endpoint), or ":port" to announce only its
	// listen port (kilo.squat.ai/endpoint).
	Endpoint string
	// InternalIP and InternalIP6 are the node's internal addresses with the
	// prefix length of their interface (kilo.squat.ai/internal-ip), so that
	// other nodes know its subnet.
	InternalIP, InternalIP6 netip.Prefix
	// WireGuardIP is the address on the node's WireGuard interface
	// (kilo.squat.ai/wireguard-ip).
	WireGuardIP netip.Prefix
	// Granularity is the agent's mesh granularity (kilo.squat.ai/granularity).
	Granularity topology.Granularity
	// KeyRotated is the rotation request the agent last honoured
	// (kilo.squat.ai/key-rotated), published with the key it produced.
	KeyRotated string
}

// Values returns the annotations a stands for, every published key
// included; an empty value means the annotation is to be removed. It fails
// on an Endpoint that is neither host:port nor :port.
func (a NodeAnnotations) Values() (map[string]string, error) {
	v := map[string]string{
		KeyAnnotation:         "",
		EndpointAnnotation:    strings.TrimSpace(a.Endpoint),
		InternalIPAnnotation:  "",
		WireGuardIPAnnotation: "",
		GranularityAnnotation: string(a.Granularity),
		KeyRotatedAnnotation:  strings.TrimSpace(a.KeyRotated),
	}
	if !a.Key.IsZero() {
		v[KeyAnnotation] = a.Key.String()
	}
	if e := v[EndpointAnnotation]; e != "" {
		if _, ok := parsePortOnly(e); !ok {
			if _, err := parseHostPort(e); err != nil {
				return nil, &AnnotationError{Annotation: EndpointAnnotation, Value: e, Want: wantEndpoint + ", or :port"}
			}
		}
	}
	var ips []string
	for _, p := range []netip.Prefix{a.InternalIP, a.InternalIP6} {
		if p.IsValid() {
			ips = append(ips, p.String())
		}
	}
	v[InternalIPAnnotation] = strings.Join(ips, ",")
	if a.WireGuardIP.IsValid() {
		v[WireGuardIPAnnotation] = a.WireGuardIP.String()
	}
	return v, nil
}

// annotationPatch returns the merge patch that turns current into want
// (empty values removed), or nil when nothing differs.
func annotationPatch(current, want map[string]string) []byte {
	changes := map[string]any{}
	for k, v := range want {
		old, has := current[k]
		switch {
		case v == "" && has:
			changes[k] = nil
		case v != "" && (!has || old != v):
			changes[k] = v
		}
	}
	if len(changes) == 0 {
		return nil
	}
	b, _ := json.Marshal(map[string]any{"metadata": map[string]any{"annotations": changes}})
	return b
}

// PublishNode implements Backend. It compares with the informer's copy of
// the Node, so a write that the cache has not seen yet may be repeated once,
// which the API server treats as a no-op.
func (c *Client) PublishNode(ctx context.Context, name string, a NodeAnnotations) error {
	want, err := a.Values()
	if err != nil {
		return fmt.Errorf("publish node %q: %w", name, err)
	}
	var current map[string]string
	if obj, ok, _ := c.nodes.GetStore().GetByKey(name); ok {
		current = obj.(*corev1.Node).Annotations
	}
	patch := annotationPatch(current, want)
	if patch == nil {
		return nil
	}
	_, err = c.kube.CoreV1().Nodes().Patch(ctx, name, types.MergePatchType, patch, metav1.PatchOptions{FieldManager: FieldManager})
	if apierrors.IsNotFound(err) {
		return fmt.Errorf("publish node %q: %w: %w", name, ErrNotFound, err)
	}
	if err != nil {
		return fmt.Errorf("publish node %q: %w", name, err)
	}
	return nil
}

// RotateKeyRequest implements Backend, from the informer's copy of the Node.
func (c *Client) RotateKeyRequest(name string) string {
	obj, ok, _ := c.nodes.GetStore().GetByKey(name)
	if !ok {
		return ""
	}
	return strings.TrimSpace(obj.(*corev1.Node).Annotations[RotateKeyRequestAnnotation])
}
