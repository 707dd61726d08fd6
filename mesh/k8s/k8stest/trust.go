package k8stest

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"

	"github.com/kilofed/kilofed/mesh/k8s"
)

// TrustCase is one write that the agent of node Own attempts with its own
// token, and whether mesh/config's RBAC and admission policy let it through.
type TrustCase struct {
	// Name says what is written.
	Name string
	// Allowed reports whether the write must succeed; otherwise it must be
	// refused as Forbidden.
	Allowed bool
	// Do makes the write with the agent's client.
	Do func(ctx context.Context, agent kubernetes.Interface, own, other *corev1.Node) error
}

// TrustCases are the writes of an agent to its own node's state (allowed)
// and to anything else (refused): another node's published annotations, any
// node's operator annotations, labels and taints, another node's Lease.
func TrustCases() []TrustCase {
	ns := k8s.DefaultLeaseNamespace
	annotate := func(name func(own, other *corev1.Node) string, key string, value any) func(context.Context, kubernetes.Interface, *corev1.Node, *corev1.Node) error {
		return func(ctx context.Context, agent kubernetes.Interface, own, other *corev1.Node) error {
			return mergePatch(ctx, agent, name(own, other), map[string]any{"metadata": map[string]any{"annotations": map[string]any{key: value}}})
		}
	}
	ownNode := func(own, _ *corev1.Node) string { return own.Name }
	otherNode := func(_, other *corev1.Node) string { return other.Name }
	lease := func(own, other *corev1.Node, name, holder string, owner *corev1.Node) *coordinationv1.Lease {
		now := metav1.NewMicroTime(time.Now())
		return &coordinationv1.Lease{
			ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns, Labels: map[string]string{k8s.LeaseLabel: "true"},
				OwnerReferences: []metav1.OwnerReference{{APIVersion: "v1", Kind: "Node", Name: owner.Name, UID: owner.UID}}},
			Spec: coordinationv1.LeaseSpec{HolderIdentity: &holder, RenewTime: &now},
		}
	}
	renew := func(ctx context.Context, agent kubernetes.Interface, name string) error {
		l, err := agent.CoordinationV1().Leases(ns).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return fmt.Errorf("get lease %s: %w", name, err)
		}
		now := metav1.NewMicroTime(time.Now())
		l.Spec.RenewTime = &now
		_, err = agent.CoordinationV1().Leases(ns).Update(ctx, l, metav1.UpdateOptions{})
		return err
	}
	// The location election Lease TrustLocation, which CheckTrust makes
	// held by the other node in term 3 before each case.
	loc := k8s.LocationLeaseName(TrustLocation)
	rewrite := func(edit func(l *coordinationv1.Lease, own, other *corev1.Node)) func(context.Context, kubernetes.Interface, *corev1.Node, *corev1.Node) error {
		return func(ctx context.Context, agent kubernetes.Interface, own, other *corev1.Node) error {
			l, err := agent.CoordinationV1().Leases(ns).Get(ctx, loc, metav1.GetOptions{})
			if err != nil {
				return fmt.Errorf("get lease %s: %w", loc, err)
			}
			edit(l, own, other)
			_, err = agent.CoordinationV1().Leases(ns).Update(ctx, l, metav1.UpdateOptions{})
			return err
		}
	}
	take := func(l *coordinationv1.Lease, own, _ *corev1.Node) {
		now, term := metav1.NewMicroTime(time.Now()), int32(4)
		l.Spec.HolderIdentity, l.Spec.RenewTime, l.Spec.AcquireTime, l.Spec.LeaseTransitions = &own.Name, &now, &now, &term
	}
	locationLease := func(name, holder string) *coordinationv1.Lease {
		now, term := metav1.NewMicroTime(time.Now()), int32(0)
		return &coordinationv1.Lease{
			ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns, Labels: map[string]string{k8s.ElectionLabel: "trust"}},
			Spec:       coordinationv1.LeaseSpec{HolderIdentity: &holder, RenewTime: &now, AcquireTime: &now, LeaseTransitions: &term},
		}
	}
	return []TrustCase{
		{Name: "own lead published", Allowed: true, Do: annotate(ownNode, k8s.LeadsAnnotation, "4:"+TrustLocation)},
		{Name: "own lead withdrawn", Allowed: true, Do: annotate(ownNode, k8s.LeadsAnnotation, nil)},
		{Name: "another node's lead published", Do: annotate(otherNode, k8s.LeadsAnnotation, "9:"+TrustLocation)},
		{Name: "another node's lead withdrawn", Do: annotate(otherNode, k8s.LeadsAnnotation, nil)},
		{Name: "a location election Lease taken from another node", Allowed: true, Do: rewrite(take)},
		{Name: "a location election Lease taken and renewed, then released by its holder", Allowed: true,
			Do: func(ctx context.Context, agent kubernetes.Interface, own, other *corev1.Node) error {
				if err := rewrite(take)(ctx, agent, own, other); err != nil {
					return err
				}
				if err := rewrite(func(l *coordinationv1.Lease, _, _ *corev1.Node) {
					now := metav1.NewMicroTime(time.Now())
					l.Spec.RenewTime = &now
				})(ctx, agent, own, other); err != nil {
					return err
				}
				return rewrite(func(l *coordinationv1.Lease, _, _ *corev1.Node) { l.Spec.HolderIdentity = new("") })(ctx, agent, own, other)
			}},
		{Name: "a location election Lease created held by itself", Allowed: true, Do: func(ctx context.Context, agent kubernetes.Interface, own, _ *corev1.Node) error {
			_, err := agent.CoordinationV1().Leases(ns).Create(ctx, locationLease(k8s.LocationLeaseName(fmt.Sprintf("trust-%d", time.Now().UnixNano())), own.Name), metav1.CreateOptions{})
			return err
		}},
		{Name: "a location election Lease created held by another node", Do: func(ctx context.Context, agent kubernetes.Interface, _, other *corev1.Node) error {
			_, err := agent.CoordinationV1().Leases(ns).Create(ctx, locationLease(k8s.LocationLeaseName(fmt.Sprintf("trust-%d", time.Now().UnixNano())), other.Name), metav1.CreateOptions{})
			return err
		}},
		{Name: "a location election Lease given to another node", Do: rewrite(func(l *coordinationv1.Lease, _, _ *corev1.Node) {
			l.Spec.HolderIdentity = new("third-node")
		})},
		{Name: "a location election Lease released by a node that does not hold it", Do: rewrite(func(l *coordinationv1.Lease, _, _ *corev1.Node) {
			l.Spec.HolderIdentity = new("")
		})},
		{Name: "a location election Lease taken with its term lowered", Do: rewrite(func(l *coordinationv1.Lease, own, other *corev1.Node) {
			take(l, own, other)
			l.Spec.LeaseTransitions = new(int32(0))
		})},
		{Name: "a location election Lease deleted", Do: func(ctx context.Context, agent kubernetes.Interface, _, _ *corev1.Node) error {
			return agent.CoordinationV1().Leases(ns).Delete(ctx, loc, metav1.DeleteOptions{})
		}},
		{Name: "own published annotations", Allowed: true, Do: func(ctx context.Context, agent kubernetes.Interface, own, _ *corev1.Node) error {
			return mergePatch(ctx, agent, own.Name, map[string]any{"metadata": map[string]any{"annotations": map[string]any{
				k8s.KeyAnnotation: "Lw+uB7XCFqhSLtDC+0q6Y+L6XRUkypc7OWZ8+RU6yQ0=", k8s.EndpointAnnotation: ":51820",
				k8s.InternalIPAnnotation: "10.0.1.1/24", k8s.WireGuardIPAnnotation: "10.4.0.1/16", k8s.GranularityAnnotation: "location",
			}}})
		}},
		{Name: "own published annotation removed", Allowed: true, Do: annotate(ownNode, k8s.WireGuardIPAnnotation, nil)},
		{Name: "own key rotation reported", Allowed: true, Do: annotate(ownNode, k8s.KeyRotatedAnnotation, "2026-12-01T10:00:00Z")},
		{Name: "own key rotation requested", Do: annotate(ownNode, k8s.RotateKeyRequestAnnotation, "2026-12-01T10:00:00Z")},
		{Name: "another node's key", Do: annotate(otherNode, k8s.KeyAnnotation, "rq3iv0e/ygoFaF5Hc38nwYov6HvfRrUi8mxazIua6Xo=")},
		{Name: "another node's endpoint", Do: annotate(otherNode, k8s.EndpointAnnotation, "198.51.100.66:51820")},
		{Name: "another node's key removed", Do: annotate(otherNode, k8s.KeyAnnotation, nil)},
		{Name: "another node's force-endpoint", Do: annotate(otherNode, k8s.ForceEndpointAnnotation, "198.51.100.66:51820")},
		{Name: "another node's allowed-location-ips", Do: annotate(otherNode, k8s.AllowedLocationIPsAnnotation, "0.0.0.0/1")},
		{Name: "own force-endpoint", Do: annotate(ownNode, k8s.ForceEndpointAnnotation, "198.51.100.66:51820")},
		{Name: "own allowed-location-ips", Do: annotate(ownNode, k8s.AllowedLocationIPsAnnotation, "0.0.0.0/1")},
		{Name: "own location", Do: annotate(ownNode, k8s.LocationAnnotation, "elsewhere")},
		{Name: "own leader annotation", Do: annotate(ownNode, k8s.LeaderAnnotation, "true")},
		{Name: "own public-key alias", Do: annotate(ownNode, k8s.PublicKeyAnnotation, "rq3iv0e/ygoFaF5Hc38nwYov6HvfRrUi8mxazIua6Xo=")},
		{Name: "a label on its own node", Do: func(ctx context.Context, agent kubernetes.Interface, own, _ *corev1.Node) error {
			return mergePatch(ctx, agent, own.Name, map[string]any{"metadata": map[string]any{"labels": map[string]any{"topology.kubernetes.io/region": "elsewhere"}}})
		}},
		{Name: "a label on another node", Do: func(ctx context.Context, agent kubernetes.Interface, _, other *corev1.Node) error {
			return mergePatch(ctx, agent, other.Name, map[string]any{"metadata": map[string]any{"labels": map[string]any{"node-role.kubernetes.io/control-plane": ""}}})
		}},
		{Name: "a taint on its own node", Do: func(ctx context.Context, agent kubernetes.Interface, own, _ *corev1.Node) error {
			return mergePatch(ctx, agent, own.Name, map[string]any{"spec": map[string]any{"taints": []map[string]any{{"key": "evil", "effect": "NoSchedule"}}}})
		}},
		{Name: "a taint on another node", Do: func(ctx context.Context, agent kubernetes.Interface, _, other *corev1.Node) error {
			return mergePatch(ctx, agent, other.Name, map[string]any{"spec": map[string]any{"taints": []map[string]any{{"key": "evil", "effect": "NoExecute"}}}})
		}},
		{Name: "another node cordoned", Do: func(ctx context.Context, agent kubernetes.Interface, _, other *corev1.Node) error {
			return mergePatch(ctx, agent, other.Name, map[string]any{"spec": map[string]any{"unschedulable": true}})
		}},
		{Name: "own Lease created", Allowed: true, Do: func(ctx context.Context, agent kubernetes.Interface, own, other *corev1.Node) error {
			_ = agent.CoordinationV1().Leases(ns).Delete(ctx, k8s.LeaseName(own.Name), metav1.DeleteOptions{})
			_, err := agent.CoordinationV1().Leases(ns).Create(ctx, lease(own, other, k8s.LeaseName(own.Name), own.Name, own), metav1.CreateOptions{})
			return err
		}},
		{Name: "own Lease renewed", Allowed: true, Do: func(ctx context.Context, agent kubernetes.Interface, own, _ *corev1.Node) error {
			return renew(ctx, agent, k8s.LeaseName(own.Name))
		}},
		{Name: "own Lease held by another node", Do: func(ctx context.Context, agent kubernetes.Interface, own, other *corev1.Node) error {
			l, err := agent.CoordinationV1().Leases(ns).Get(ctx, k8s.LeaseName(own.Name), metav1.GetOptions{})
			if err != nil {
				return fmt.Errorf("get own lease: %w", err)
			}
			l.Spec.HolderIdentity = &other.Name
			_, err = agent.CoordinationV1().Leases(ns).Update(ctx, l, metav1.UpdateOptions{})
			return err
		}},
		{Name: "own Lease owned by another node", Do: func(ctx context.Context, agent kubernetes.Interface, own, other *corev1.Node) error {
			l, err := agent.CoordinationV1().Leases(ns).Get(ctx, k8s.LeaseName(own.Name), metav1.GetOptions{})
			if err != nil {
				return fmt.Errorf("get own lease: %w", err)
			}
			l.OwnerReferences = []metav1.OwnerReference{{APIVersion: "v1", Kind: "Node", Name: other.Name, UID: other.UID}}
			_, err = agent.CoordinationV1().Leases(ns).Update(ctx, l, metav1.UpdateOptions{})
			return err
		}},
		{Name: "own Lease deleted", Allowed: true, Do: func(ctx context.Context, agent kubernetes.Interface, own, _ *corev1.Node) error {
			return agent.CoordinationV1().Leases(ns).Delete(ctx, k8s.LeaseName(own.Name), metav1.DeleteOptions{})
		}},
		{Name: "another node's Lease renewed", Do: func(ctx context.Context, agent kubernetes.Interface, _, other *corev1.Node) error {
			return renew(ctx, agent, k8s.LeaseName(other.Name))
		}},
		{Name: "another node's Lease deleted", Do: func(ctx context.Context, agent kubernetes.Interface, _, other *corev1.Node) error {
			return agent.CoordinationV1().Leases(ns).Delete(ctx, k8s.LeaseName(other.Name), metav1.DeleteOptions{})
		}},
		{Name: "a Lease for another node created", Do: func(ctx context.Context, agent kubernetes.Interface, own, other *corev1.Node) error {
			_, err := agent.CoordinationV1().Leases(ns).Create(ctx, lease(own, other, k8s.LeaseName(other.Name+"-x"), other.Name+"-x", own), metav1.CreateOptions{})
			return err
		}},
		{Name: "a kube-system Lease (the scheduler's)", Do: func(ctx context.Context, agent kubernetes.Interface, own, other *corev1.Node) error {
			l := lease(own, other, "kube-scheduler", own.Name, own)
			l.Namespace = "kube-system"
			_, err := agent.CoordinationV1().Leases("kube-system").Create(ctx, l, metav1.CreateOptions{})
			return err
		}},
	}
}

// TrustLocation is the location whose election Lease the TrustCases write.
const TrustLocation = "trust-location"

// CheckTrust runs every TrustCase as a subtest with the agent's client of
// node own, other being another node; admin recreates the other node's Lease
// before each case, so that there is one to attack.
func CheckTrust(t *testing.T, ctx context.Context, admin, agent kubernetes.Interface, own, other string) {
	t.Helper()
	ownNode, err := admin.CoreV1().Nodes().Get(ctx, own, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	otherNode, err := admin.CoreV1().Nodes().Get(ctx, other, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range TrustCases() {
		t.Run(tc.Name, func(t *testing.T) {
			holder := other
			l := &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: k8s.LeaseName(other), Namespace: k8s.DefaultLeaseNamespace},
				Spec: coordinationv1.LeaseSpec{HolderIdentity: &holder}}
			if _, err := admin.CoordinationV1().Leases(l.Namespace).Create(ctx, l, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
				t.Fatal(err)
			}
			term := int32(3)
			loc := &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: k8s.LocationLeaseName(TrustLocation), Namespace: k8s.DefaultLeaseNamespace},
				Spec: coordinationv1.LeaseSpec{HolderIdentity: &holder, LeaseTransitions: &term}}
			_ = admin.CoordinationV1().Leases(loc.Namespace).Delete(ctx, loc.Name, metav1.DeleteOptions{})
			if _, err := admin.CoordinationV1().Leases(loc.Namespace).Create(ctx, loc, metav1.CreateOptions{}); err != nil {
				t.Fatal(err)
			}
			err := tc.Do(ctx, agent, ownNode, otherNode)
			switch {
			case tc.Allowed && err != nil:
				t.Errorf("refused: %v", err)
			case !tc.Allowed && err == nil:
				t.Errorf("allowed, want Forbidden")
			case !tc.Allowed && !apierrors.IsForbidden(err):
				t.Errorf("error %v, want Forbidden", err)
			case err != nil:
				t.Logf("refused as wanted: %v", err)
			}
		})
	}
}

// WaitTrustEnforced waits until both admission policies are in effect: the
// Nodes' one refuses the agent's change of another node's key, and the
// Leases' one refuses, in a dry run, a Lease held by another node. Each
// policy takes effect a moment after it is created, and not both at once: a
// run that waited for the Nodes' policy alone saw the first Lease cases
// allowed.
func WaitTrustEnforced(ctx context.Context, agent kubernetes.Interface, other string) error {
	patch := map[string]any{"metadata": map[string]any{"annotations": map[string]any{k8s.KeyAnnotation: "rq3iv0e/ygoFaF5Hc38nwYov6HvfRrUi8mxazIua6Xo="}}}
	now := metav1.NewMicroTime(time.Now())
	probe := &coordinationv1.Lease{
		ObjectMeta: metav1.ObjectMeta{Name: k8s.LocationLeaseName("trust-probe"), Namespace: k8s.DefaultLeaseNamespace},
		Spec:       coordinationv1.LeaseSpec{HolderIdentity: &other, RenewTime: &now},
	}
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	for {
		err := mergePatch(ctx, agent, other, patch)
		if refusedBy(err, "kilo-node-scoped-nodes") {
			_, err = agent.CoordinationV1().Leases(probe.Namespace).Create(ctx, probe, metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
			if refusedBy(err, "kilo-node-scoped-leases") {
				return nil
			}
		}
		select {
		case <-ctx.Done():
			return errors.Join(errors.New("the admission policies are not both enforced after 30s"), err)
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// refusedBy reports whether err is the refusal of the named admission
// policy: RBAC refuses as Forbidden too (a RoleBinding that has not reached
// the authorizer yet), which says nothing about the policy.
func refusedBy(err error, policy string) bool {
	return apierrors.IsForbidden(err) && strings.Contains(err.Error(), "ValidatingAdmissionPolicy '"+policy+"'")
}

// mergePatch merge-patches the named Node.
func mergePatch(ctx context.Context, c kubernetes.Interface, node string, patch map[string]any) error {
	b, err := json.Marshal(patch)
	if err != nil {
		return err
	}
	_, err = c.CoreV1().Nodes().Patch(ctx, node, types.MergePatchType, b, metav1.PatchOptions{})
	return err
}
