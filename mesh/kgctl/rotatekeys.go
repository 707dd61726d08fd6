package kgctl

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"

	"github.com/kilofed/kilofed/mesh/k8s"
)

// RotateFieldManager names the rotation requests in managedFields.
const RotateFieldManager = "kilofed-rotate-keys"

// ErrRotationTimeout is wrapped by RotateKeys' error when some nodes did
// not report their new key in time.
var ErrRotationTimeout = errors.New("key rotation not reported in time")

// RotateOptions configures RotateKeys.
type RotateOptions struct {
	// Nodes are the nodes whose keys to rotate; with All, every node that
	// carries a published key.
	Nodes []string
	All   bool
	// Timeout bounds the wait for the agents' reports; zero means 1 min.
	Timeout time.Duration
	// Poll is the time between two reads of the nodes; zero means 250 ms.
	Poll time.Duration
	// Progress is the time between two "waiting" lines; zero means 5 s.
	Progress time.Duration
	// Now is the clock; nil means time.Now.
	Now func() time.Time
}

// Rotation is the outcome of one node's rotation.
type Rotation struct {
	Node     string
	Old, New string // public keys, as published
	Took     time.Duration
}

// RotateKeys asks each node's agent for a new WireGuard key, by writing a
// unique request value in the Node's kilo.squat.ai/rotate-key annotation,
// then waits until every agent reports, in kilo.squat.ai/key-rotated, that
// it honoured that value; the new key is published in the same write. It
// prints a line per step on w and returns the rotations done, with an error
// wrapping ErrRotationTimeout naming the nodes that did not report.
func RotateKeys(ctx context.Context, kube kubernetes.Interface, o RotateOptions, w io.Writer) ([]Rotation, error) {
	if o.All == (len(o.Nodes) > 0) {
		return nil, fmt.Errorf("%w: pass --node NAME (repeatable) or --all", ErrUsage)
	}
	o.Timeout = cmpOr(o.Timeout, time.Minute)
	o.Poll = cmpOr(o.Poll, 250*time.Millisecond)
	o.Progress = cmpOr(o.Progress, 5*time.Second)
	if o.Now == nil {
		o.Now = time.Now
	}
	nodes, err := rotationTargets(ctx, kube, o, w)
	if err != nil {
		return nil, err
	}
	start := o.Now()
	value := start.UTC().Format(time.RFC3339Nano)
	old := map[string]string{}
	for _, n := range nodes {
		old[n.Name] = n.Annotations[k8s.KeyAnnotation]
		patch, _ := json.Marshal(map[string]any{"metadata": map[string]any{"annotations": map[string]string{k8s.RotateKeyRequestAnnotation: value}}})
		if _, err := kube.CoreV1().Nodes().Patch(ctx, n.Name, types.MergePatchType, patch, metav1.PatchOptions{FieldManager: RotateFieldManager}); err != nil {
			return nil, fmt.Errorf("request a new key on node %s: %w", n.Name, err)
		}
		fmt.Fprintf(w, "requested a new key on node %s (key %s, request %s)\n", n.Name, keyPrefix(old[n.Name]), value)
	}

	ctx, cancel := context.WithTimeout(ctx, o.Timeout)
	defer cancel()
	pending := slices.Sorted(func(yield func(string) bool) {
		for name := range old {
			if !yield(name) {
				return
			}
		}
	})
	var done []Rotation
	poll := time.NewTicker(o.Poll)
	defer poll.Stop()
	lastProgress := start
	for {
		for _, name := range slices.Clone(pending) {
			n, err := kube.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
			if err != nil {
				if ctx.Err() != nil {
					break
				}
				fmt.Fprintf(w, "read node %s: %v (retrying)\n", name, err)
				continue
			}
			if n.Annotations[k8s.KeyRotatedAnnotation] != value {
				continue
			}
			r := Rotation{Node: name, Old: old[name], New: n.Annotations[k8s.KeyAnnotation], Took: o.Now().Sub(start)}
			done = append(done, r)
			pending = slices.DeleteFunc(pending, func(s string) bool { return s == name })
			fmt.Fprintf(w, "node %s: key %s -> %s (%s)\n", name, keyPrefix(r.Old), keyPrefix(r.New), r.Took.Round(time.Millisecond))
		}
		if len(pending) == 0 {
			fmt.Fprintf(w, "rotated the keys of %d node(s) in %s; the other locations and the joined clusters follow the published keys\n",
				len(done), o.Now().Sub(start).Round(time.Millisecond))
			return done, nil
		}
		if now := o.Now(); now.Sub(lastProgress) >= o.Progress {
			lastProgress = now
			fmt.Fprintf(w, "waiting for %d node(s) to report a new key: %s\n", len(pending), strings.Join(pending, ", "))
		}
		select {
		case <-ctx.Done():
			return done, fmt.Errorf("%w: %d of %d node(s) did not report a new key within %s: %s (is kg running there with a writable --key-file? see its log)",
				ErrRotationTimeout, len(pending), len(nodes), o.Timeout, strings.Join(pending, ", "))
		case <-poll.C:
		}
	}
}

// rotationTargets returns the Nodes to rotate: the named ones, which must
// exist, or with All every node with a published key (the others run no
// agent yet, and are named as skipped).
func rotationTargets(ctx context.Context, kube kubernetes.Interface, o RotateOptions, w io.Writer) ([]corev1.Node, error) {
	if !o.All {
		var out []corev1.Node
		for _, name := range o.Nodes {
			n, err := kube.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
			if apierrors.IsNotFound(err) {
				return nil, fmt.Errorf("node %s does not exist: check the name with kubectl get nodes", name)
			}
			if err != nil {
				return nil, fmt.Errorf("read node %s: %w", name, err)
			}
			out = append(out, *n)
		}
		return out, nil
	}
	list, err := kube.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, fmt.Errorf("list nodes: %w", err)
	}
	var out []corev1.Node
	for _, n := range list.Items {
		if n.Annotations[k8s.KeyAnnotation] == "" {
			fmt.Fprintf(w, "skipping node %s: no published key (no agent running there)\n", n.Name)
			continue
		}
		out = append(out, n)
	}
	if len(out) == 0 {
		return nil, errors.New("no node carries a published key (kilo.squat.ai/key): are the agents running?")
	}
	return out, nil
}

// keyPrefix shortens a public key for display.
func keyPrefix(k string) string {
	if k == "" {
		return "(none)"
	}
	if len(k) > 8 {
		return k[:8] + "..."
	}
	return k
}

func cmpOr(d, def time.Duration) time.Duration {
	if d > 0 {
		return d
	}
	return def
}
