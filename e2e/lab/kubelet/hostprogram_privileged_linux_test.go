//go:build linux

package kubelet

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// socatScript is a listener in the style of the MCS conformance suite's
// hello pods: it picks the first of $MY_POD_IPS and answers every
// connection with it, through the host's sh, tr, awk, grep and socat.
const socatScript = `first_ip=$(echo "$MY_POD_IPS" | tr ',' ' ' | awk '{print $1}')
export first_ip
if echo "$MY_POD_IPS" | grep -q ':'; then
	echo "listening dual-stack for $first_ip" >&2
	exec socat TCP6-LISTEN:42,crlf,reuseaddr,fork,ipv6only=0 SYSTEM:'echo "pod ip $first_ip"'
fi
exec socat TCP-LISTEN:42,crlf,reuseaddr,fork SYSTEM:'echo "pod ip $first_ip"'`

func TestPrivilegedHostProgramImagesRunTheirCommands(t *testing.T) {
	binDir := t.TempDir()
	kg := "#!/bin/sh\necho \"kg $*\"\nexec sleep 3600\n"
	if err := os.WriteFile(filepath.Join(binDir, "kg"), []byte(kg), 0o755); err != nil {
		t.Fatal(err)
	}
	h := startHarness(t, func(c *Config) { c.ImageBinDir = binDir })

	// alpine/socat with the conformance suite's shape: /bin/sh command,
	// script args, answering on port 42 of the pod IP.
	h.create(t, hostPod("hello", corev1.Container{Image: "alpine/socat:1.7.4.4", Command: []string{"/bin/sh"},
		Args: []string{"-c", socatScript}, Env: []corev1.EnvVar{{Name: "MY_POD_IPS",
			ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{FieldPath: "status.podIPs"}}}}}))
	// socat's ENTRYPOINT with args only, $(VAR) expanded from the env.
	h.create(t, hostPod("entry", corev1.Container{Image: "alpine/socat", Env: []corev1.EnvVar{{Name: "WORD", Value: "hi-there"}},
		Args: []string{"TCP-LISTEN:43,reuseaddr,fork", "SYSTEM:echo $(WORD)"}}))
	// nicolaka/netshoot with the conformance suite's client loop.
	// Its environment comes from a ConfigMap and the downward API too.
	if _, err := h.client.CoreV1().ConfigMaps(h.ns).Create(context.Background(), &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Name: "cfg"}, Data: map[string]string{"mode": "fast"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	// It names its ServiceAccount (as the admission would): it gets the
	// token volume, and exec enters its mount namespace and netns.
	client := hostPod("client", corev1.Container{Image: "nicolaka/netshoot:v0.15",
		Args: []string{"/bin/sh", "-ec", "while :; do echo '.'; sleep 5 ; done"},
		EnvFrom: []corev1.EnvFromSource{{Prefix: "CFG_", ConfigMapRef: &corev1.ConfigMapEnvSource{
			LocalObjectReference: corev1.LocalObjectReference{Name: "cfg"}}}},
		Env: []corev1.EnvVar{{Name: "MY_NAME", ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{FieldPath: "metadata.name"}}}}})
	client.Spec.ServiceAccountName = "default"
	h.create(t, client)
	// kilofed's kg image, hostNetwork: ImageBinDir/kg with expanded args.
	agent := hostPod("agent", corev1.Container{Image: "ghcr.io/kilofed/kg:v0.1", Args: []string{"--hostname=$(NODE_NAME)"},
		Env: []corev1.EnvVar{{Name: "NODE_NAME", ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{FieldPath: "spec.nodeName"}}}}})
	agent.Spec.HostNetwork = true
	h.create(t, agent)
	// A real command's exit code ends a restartPolicy Never pod.
	fail := hostPod("fail", corev1.Container{Image: "nicolaka/netshoot", Command: []string{"sh", "-c", "echo bye; exit 3"}})
	fail.Spec.RestartPolicy = corev1.RestartPolicyNever
	h.create(t, fail)

	for _, name := range []string{"hello", "entry", "client", "agent"} {
		waitPodReady(t, h.client, h.ns, name)
	}
	hello := h.pod(t, "hello")
	helloIP := hello.Status.PodIPs[0].IP // pods start in any order: any of the first addresses
	for _, ip := range []string{helloIP, hello.Status.PodIPs[1].IP} {
		eventually(t, 20*time.Second, "socat answers on "+ip, func() error {
			out, err := h.inNode("nc", "-w", "3", ip, "42")
			if err != nil || out != "pod ip "+helloIP+"\r\n" {
				return fmt.Errorf("got %q, %v", out, err)
			}
			return nil
		})
	}
	entryIP := h.pod(t, "entry").Status.PodIP
	eventually(t, 20*time.Second, "socat entrypoint answers", func() error {
		out, err := h.inNode("nc", "-w", "3", entryIP, "43")
		if err != nil || out != "hi-there\n" {
			return fmt.Errorf("got %q, %v", out, err)
		}
		return nil
	})

	// kubectl exec into netshoot runs the host's tools in the pod's netns.
	clientIP := h.pod(t, "client").Status.PodIP
	kubeSvc, err := h.client.CoreV1().Services("default").Get(context.Background(), "kubernetes", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	// Its first line may come a moment after it is Running (its mounts
	// are made first).
	eventually(t, 10*time.Second, "client's first log line", func() error {
		if !strings.Contains(h.logs("client"), ".\n") {
			return fmt.Errorf("log %q", h.logs("client"))
		}
		return nil
	})
	h.api.check(t, h.ns, "client", func(ex apiExec) {
		// As the conformance suite does, retried: socat may close the
		// connection before relaying the answer when its SYSTEM child exits
		// first (it then logs a broken pipe).
		eventually(t, 20*time.Second, "nc from client to hello", func() error {
			if out, code := ex("sh", "-c", "echo hi | nc -v -w 2 -4 "+hello.Status.PodIP+" 42 2>&1"); code != 0 || !strings.Contains(out, "pod ip "+helloIP) {
				return fmt.Errorf("%d %q", code, out)
			}
			return nil
		})
		if out, code := ex("ip", "-o", "addr", "show", "dev", "eth0"); code != 0 || !strings.Contains(out, " "+clientIP+"/32 ") {
			t.Errorf("exec ip addr in client = %d %q, want eth0 with %s", code, out, clientIP)
		}
		if out, code := ex("cat", ServiceAccountMountPath+"/namespace"); code != 0 || out != h.ns {
			t.Errorf("exec'd cat of the token volume's namespace = %d %q, want %q", code, out, h.ns)
		}
		want := "client fast " + kubeSvc.Spec.ClusterIP + " 443\n"
		if out, code := ex("sh", "-c", "echo $MY_NAME $CFG_mode $KUBERNETES_SERVICE_HOST $KUBERNETES_SERVICE_PORT"); code != 0 || out != want {
			t.Errorf("exec'd env in client = %d %q, want %q", code, out, want)
		}
	}, ".\n")
	if logs := h.logs("hello"); !strings.Contains(logs, "listening dual-stack for "+helloIP) {
		t.Errorf("hello's log %q lacks its stderr", logs)
	}

	// The kg image ran ImageBinDir/kg in the node netns.
	h.api.check(t, h.ns, "agent", func(ex apiExec) {
		if out, code := ex("ip", "-o", "addr", "show", "dev", "lo"); code != 0 || !strings.Contains(out, ktNodeIP.String()) {
			t.Errorf("exec ip addr in the hostNetwork agent = %d %q, want the node's %s", code, out, ktNodeIP)
		}
	}, "kg --hostname=kt-node\n")

	eventually(t, 30*time.Second, "fail Failed with exit code 3", func() error {
		p := h.pod(t, "fail")
		if p.Status.Phase != corev1.PodFailed || len(p.Status.ContainerStatuses) != 1 ||
			p.Status.ContainerStatuses[0].State.Terminated == nil || p.Status.ContainerStatuses[0].State.Terminated.ExitCode != 3 {
			return fmt.Errorf("phase %s, statuses %+v", p.Status.Phase, p.Status.ContainerStatuses)
		}
		return nil
	})
	if logs := h.logs("fail"); !strings.Contains(logs, "bye\n") {
		t.Errorf("fail's log = %q", logs)
	}
}
