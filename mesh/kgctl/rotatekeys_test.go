package kgctl

import (
	"bytes"
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	kfake "k8s.io/client-go/kubernetes/fake"
	ktesting "k8s.io/client-go/testing"

	"github.com/kilofed/kilofed/mesh/k8s"
)

const (
	rotOldA = "AAAAAAAAoldkeyAoldkeyAoldkeyAoldkeyAoldkey="
	rotOldB = "BBBBBBBBoldkeyBoldkeyBoldkeyBoldkeyBoldkey="
)

func rotNode(name, key string) *corev1.Node {
	n := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Annotations: map[string]string{}}}
	if key != "" {
		n.Annotations[k8s.KeyAnnotation] = key
	}
	return n
}

// answeringAgents makes the fake API server answer every rotation request
// of the nodes in agents as their agents do: the patch that writes the
// request is followed by the agent's write of a new key and of the report.
func answeringAgents(kube *kfake.Clientset, agents map[string]string) {
	kube.PrependReactor("patch", "nodes", func(a ktesting.Action) (bool, runtime.Object, error) {
		p := a.(ktesting.PatchAction)
		newKey, ok := agents[p.GetName()]
		if !ok || !strings.Contains(string(p.GetPatch()), k8s.RotateKeyRequestAnnotation) {
			return false, nil, nil
		}
		tracker := kube.Tracker()
		obj, err := tracker.Get(corev1.SchemeGroupVersion.WithResource("nodes"), "", p.GetName())
		if err != nil {
			return true, nil, err
		}
		n := obj.(*corev1.Node).DeepCopy()
		req := strings.Split(strings.Split(string(p.GetPatch()), k8s.RotateKeyRequestAnnotation+`":"`)[1], `"`)[0]
		n.Annotations[k8s.RotateKeyRequestAnnotation] = req
		n.Annotations[k8s.KeyAnnotation] = newKey
		n.Annotations[k8s.KeyRotatedAnnotation] = req
		return true, n, tracker.Update(corev1.SchemeGroupVersion.WithResource("nodes"), n, "")
	})
}

// stepClock advances by a second at every reading, so that durations in
// the output are fixed.
func stepClock() func() time.Time {
	t := time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)
	return func() time.Time { t = t.Add(time.Second); return t }
}

func TestRotateKeysRequestsAndReportsOldAndNewKeys(t *testing.T) {
	kube := kfake.NewClientset(rotNode("a", rotOldA), rotNode("b", rotOldB), rotNode("joining", ""))
	answeringAgents(kube, map[string]string{"a": "NEWAAAAAnewkey", "b": "NEWBBBBBnewkey"})
	var out bytes.Buffer
	got, err := RotateKeys(context.Background(), kube, RotateOptions{All: true, Now: stepClock(), Poll: time.Millisecond}, &out)
	if err != nil {
		t.Fatalf("RotateKeys: %v\n%s", err, out.String())
	}
	if len(got) != 2 || got[0].New != "NEWAAAAAnewkey" || got[1].Old != rotOldB {
		t.Errorf("rotations = %+v", got)
	}
	for _, want := range []string{
		"skipping node joining: no published key",
		"requested a new key on node a (key AAAAAAAA..., request 2026-12-01T10:00:01Z)",
		"node a: key AAAAAAAA... -> NEWAAAAA...",
		"node b: key BBBBBBBB... -> NEWBBBBB...",
		"rotated the keys of 2 node(s)",
	} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("output lacks %q:\n%s", want, out.String())
		}
	}
	n, _ := kube.CoreV1().Nodes().Get(context.Background(), "joining", metav1.GetOptions{})
	if _, ok := n.Annotations[k8s.RotateKeyRequestAnnotation]; ok {
		t.Error("a node without an agent got a rotation request")
	}
}

func TestRotateKeysTimesOutNamingTheSilentNodes(t *testing.T) {
	kube := kfake.NewClientset(rotNode("a", rotOldA), rotNode("b", rotOldB))
	answeringAgents(kube, map[string]string{"a": "NEWAAAAAnewkey"}) // b's agent never answers
	var out bytes.Buffer
	// The clock steps a second per reading: the 5 s timeout of the context
	// is real, the progress lines come from the stepping clock.
	got, err := RotateKeys(context.Background(), kube, RotateOptions{Nodes: []string{"a", "b"}, Timeout: 50 * time.Millisecond, Poll: time.Millisecond, Progress: time.Second, Now: stepClock()}, &out)
	if !errors.Is(err, ErrRotationTimeout) || !strings.Contains(err.Error(), "1 of 2 node(s)") || !strings.Contains(err.Error(), ": b (") {
		t.Errorf("RotateKeys error = %v, want a timeout naming b", err)
	}
	if len(got) != 1 || got[0].Node != "a" {
		t.Errorf("rotations = %+v, want a's", got)
	}
	if !strings.Contains(out.String(), "waiting for 1 node(s) to report a new key: b") {
		t.Errorf("no progress line naming b:\n%s", out.String())
	}
	b, _ := kube.CoreV1().Nodes().Get(context.Background(), "b", metav1.GetOptions{})
	if b.Annotations[k8s.RotateKeyRequestAnnotation] == "" {
		t.Error("b got no rotation request")
	}
}

func TestRotateKeysRefusesBadTargets(t *testing.T) {
	kube := kfake.NewClientset(rotNode("a", rotOldA))
	for _, tc := range []struct {
		name string
		o    RotateOptions
		want string
	}{
		{name: "neither --node nor --all", want: "--node NAME"},
		{name: "both", o: RotateOptions{All: true, Nodes: []string{"a"}}, want: "--node NAME"},
		{name: "unknown node", o: RotateOptions{Nodes: []string{"nope"}}, want: "node nope does not exist"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := RotateKeys(context.Background(), kube, tc.o, &bytes.Buffer{})
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("error = %v, want %q", err, tc.want)
			}
		})
	}
	for _, a := range kube.Actions() {
		if a.GetVerb() == "patch" {
			t.Errorf("a refused command wrote %v", a)
		}
	}
}
