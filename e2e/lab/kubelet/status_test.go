package kubelet

import (
	"fmt"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// statusText renders the fields of a pod status that the kubelet owns as
// one line per fact, for readable diffs.
func statusText(st corev1.PodStatus) string {
	var b strings.Builder
	fmt.Fprintf(&b, "phase %s\n", st.Phase)
	fmt.Fprintf(&b, "podIP %s podIPs %v hostIP %s hostIPs %v\n", st.PodIP, st.PodIPs, st.HostIP, st.HostIPs)
	for _, c := range st.Conditions {
		fmt.Fprintf(&b, "condition %s=%s %s %s\n", c.Type, c.Status, c.Reason, c.Message)
	}
	for _, c := range append(append([]corev1.ContainerStatus{}, st.InitContainerStatuses...), st.ContainerStatuses...) {
		state := "?"
		switch {
		case c.State.Running != nil:
			state = "running"
		case c.State.Terminated != nil:
			state = fmt.Sprintf("terminated %d %s", c.State.Terminated.ExitCode, c.State.Terminated.Reason)
		case c.State.Waiting != nil:
			state = "waiting " + c.State.Waiting.Reason
		}
		last := ""
		if c.LastTerminationState.Terminated != nil {
			last = fmt.Sprintf(" last=%d", c.LastTerminationState.Terminated.ExitCode)
		}
		fmt.Fprintf(&b, "container %s ready=%v restarts=%d %s%s\n", c.Name, c.Ready, c.RestartCount, state, last)
	}
	return b.String()
}

func TestPodStatus(t *testing.T) {
	t0 := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	pod := &corev1.Pod{Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "app", Image: "http-echo"}}}}
	podInit := pod.DeepCopy()
	podInit.Spec.InitContainers = []corev1.Container{{Name: "init", Image: "busybox"}}
	v4 := []netip.Addr{netip.MustParseAddr("10.42.0.2")}
	host := []netip.Addr{netip.MustParseAddr("10.0.1.10")}
	running := func(ready bool) containerSnapshot {
		return containerSnapshot{Name: "app", Image: "http-echo", Running: true, StartedAt: t0, Ready: ready}
	}
	exit := func(code int32) *exitInfo {
		return &exitInfo{ExitCode: code, StartedAt: t0, FinishedAt: t0.Add(time.Second)}
	}
	const scheduled = "condition PodScheduled=True  \n"
	tests := []struct {
		name string
		pod  *corev1.Pod
		snap podSnapshot
		want string
	}{
		{name: "running, ports not bound yet", pod: pod,
			snap: podSnapshot{PodIPs: v4, HostIPs: host, StartTime: t0, Containers: []containerSnapshot{running(false)}},
			want: "phase Running\npodIP 10.42.0.2 podIPs [{10.42.0.2}] hostIP 10.0.1.10 hostIPs [{10.0.1.10}]\n" +
				"condition PodReadyToStartContainers=True  \ncondition Initialized=True  \n" +
				"condition Ready=False ContainersNotReady containers with unready status: [app]\n" +
				"condition ContainersReady=False ContainersNotReady containers with unready status: [app]\n" + scheduled +
				"container app ready=false restarts=0 running\n"},
		{name: "running and ready, dual-stack", pod: pod,
			snap: podSnapshot{PodIPs: append(v4, netip.MustParseAddr("fd10:42::2")), HostIPs: host, StartTime: t0, Containers: []containerSnapshot{running(true)}},
			want: "phase Running\npodIP 10.42.0.2 podIPs [{10.42.0.2} {fd10:42::2}] hostIP 10.0.1.10 hostIPs [{10.0.1.10}]\n" +
				"condition PodReadyToStartContainers=True  \ncondition Initialized=True  \n" +
				"condition Ready=True  \ncondition ContainersReady=True  \n" + scheduled +
				"container app ready=true restarts=0 running\n"},
		{name: "init containers reported completed", pod: podInit,
			snap: podSnapshot{PodIPs: v4, HostIPs: host, StartTime: t0, Containers: []containerSnapshot{running(true)}},
			want: "phase Running\npodIP 10.42.0.2 podIPs [{10.42.0.2}] hostIP 10.0.1.10 hostIPs [{10.0.1.10}]\n" +
				"condition PodReadyToStartContainers=True  \ncondition Initialized=True  \n" +
				"condition Ready=True  \ncondition ContainersReady=True  \n" + scheduled +
				"container init ready=true restarts=0 terminated 0 Completed\ncontainer app ready=true restarts=0 running\n"},
		{name: "waiting to restart after a crash", pod: pod,
			snap: podSnapshot{PodIPs: v4, HostIPs: host, StartTime: t0, Containers: []containerSnapshot{
				{Name: "app", Image: "http-echo", RestartCount: 2, Waiting: "CrashLoopBackOff", LastTerminated: exit(1)}}},
			want: "phase Running\npodIP 10.42.0.2 podIPs [{10.42.0.2}] hostIP 10.0.1.10 hostIPs [{10.0.1.10}]\n" +
				"condition PodReadyToStartContainers=True  \ncondition Initialized=True  \n" +
				"condition Ready=False ContainersNotReady containers with unready status: [app]\n" +
				"condition ContainersReady=False ContainersNotReady containers with unready status: [app]\n" + scheduled +
				"container app ready=false restarts=2 waiting CrashLoopBackOff last=1\n"},
		{name: "sleep done with restartPolicy Never", pod: pod,
			snap: podSnapshot{PodIPs: v4, HostIPs: host, StartTime: t0, Containers: []containerSnapshot{
				{Name: "app", Image: "alpine", Terminated: exit(0)}}},
			want: "phase Succeeded\npodIP 10.42.0.2 podIPs [{10.42.0.2}] hostIP 10.0.1.10 hostIPs [{10.0.1.10}]\n" +
				"condition PodReadyToStartContainers=False  \ncondition Initialized=True  \n" +
				"condition Ready=False PodCompleted \ncondition ContainersReady=False PodCompleted \n" + scheduled +
				"container app ready=false restarts=0 terminated 0 Completed\n"},
		{name: "one container failed for good", pod: pod,
			snap: podSnapshot{PodIPs: v4, HostIPs: host, StartTime: t0, Containers: []containerSnapshot{
				{Name: "app", Terminated: exit(0)}, {Name: "side", Terminated: exit(137)}}},
			want: "phase Failed\npodIP 10.42.0.2 podIPs [{10.42.0.2}] hostIP 10.0.1.10 hostIPs [{10.0.1.10}]\n" +
				"condition PodReadyToStartContainers=False  \ncondition Initialized=True  \n" +
				"condition Ready=False PodCompleted \ncondition ContainersReady=False PodCompleted \n" + scheduled +
				"container app ready=false restarts=0 terminated 0 Completed\ncontainer side ready=false restarts=0 terminated 137 Error\n"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := podStatus(tt.pod, corev1.PodStatus{}, tt.snap, metav1.NewTime(t0))
			if diff := cmp.Diff(tt.want, statusText(got)); diff != "" {
				t.Errorf("podStatus (-want +got):\n%s", diff)
			}
		})
	}
}

// TestPodStatusKeepsHistory checks what podStatus must keep from the previous
// status: transition times of unchanged conditions, foreign conditions and
// fields set by the API server.
func TestPodStatusKeepsHistory(t *testing.T) {
	t0 := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	t1 := t0.Add(time.Minute)
	pod := &corev1.Pod{Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "app"}}}}
	snap := podSnapshot{PodIPs: []netip.Addr{netip.MustParseAddr("10.42.0.2")}, StartTime: t0,
		Containers: []containerSnapshot{{Name: "app", Running: true, Ready: true, StartedAt: t0}}}
	prev := podStatus(pod, corev1.PodStatus{QOSClass: corev1.PodQOSBestEffort}, snap, metav1.NewTime(t0))
	prev.Conditions = append(prev.Conditions, corev1.PodCondition{Type: corev1.DisruptionTarget, Status: corev1.ConditionTrue})
	got := podStatus(pod, prev, snap, metav1.NewTime(t1))
	tests := []struct {
		name string
		got  any
		want any
	}{
		{name: "Ready transition time kept", got: conditionOf(got, corev1.PodReady).LastTransitionTime.Time, want: t0},
		{name: "foreign condition kept", got: conditionOf(got, corev1.DisruptionTarget).Status, want: corev1.ConditionTrue},
		{name: "qosClass kept", got: got.QOSClass, want: corev1.PodQOSBestEffort},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if diff := cmp.Diff(tt.want, tt.got); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}
	// A changed condition gets a new transition time.
	snap.Containers[0].Ready = false
	changed := podStatus(pod, got, snap, metav1.NewTime(t1))
	if tt := conditionOf(changed, corev1.PodReady).LastTransitionTime.Time; !tt.Equal(t1) {
		t.Errorf("Ready went False but its transition time is %v, want %v", tt, t1)
	}
}

func conditionOf(st corev1.PodStatus, typ corev1.PodConditionType) corev1.PodCondition {
	for _, c := range st.Conditions {
		if c.Type == typ {
			return c
		}
	}
	return corev1.PodCondition{}
}
