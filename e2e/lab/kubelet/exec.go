package kubelet

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/cri-streaming/pkg/streaming/remotecommand"
	utilexec "k8s.io/utils/exec"
)

// execPath is the PATH of exec'd commands, a container runtime's default.
const execPath = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"

// Sentinel errors of the kubelet API.
var (
	// ErrPodNotFound means the pod or container named in a request is not
	// one this kubelet runs.
	ErrPodNotFound = errors.New("pod or container not found on this node")
	// ErrContainerNotRunning means an exec was asked of a container that
	// is not running (pod finished, container waiting to restart).
	ErrContainerNotRunning = errors.New("container not running")
)

// execSpec is one command run for `kubectl exec`.
type execSpec struct {
	Argv           []string // the whole argv, netns prefix included
	Env            []string
	Stdin          io.Reader // nil: no stdin
	Stdout, Stderr io.Writer // nil: discarded
	TTY            bool
	Resize         <-chan remotecommand.TerminalSize
}

// execTarget is the running container a command is exec'd into.
type execTarget struct {
	netns string
	// pid, when not 0, is the container's process, whose mount namespace
	// (and netns) the command enters.
	pid int
	env []string
	// done ends when the pod is torn down or finishes: the command is
	// killed then.
	done context.Context
}

// handleExec serves /exec/{namespace}/{pod}[/{uid}]/{container}: the
// remote command protocol (SPDY v1-v4, WebSocket) of `kubectl exec`.
func (k *kubelet) handleExec(w http.ResponseWriter, r *http.Request) {
	ns, name, uid, container := r.PathValue("namespace"), r.PathValue("pod"), r.PathValue("uid"), r.PathValue("container")
	opts, err := remotecommand.NewOptions(r)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	cmd := r.URL.Query()["command"]
	if len(cmd) == 0 || cmd[0] == "" {
		http.Error(w, "missing command: give at least one command= parameter", http.StatusBadRequest)
		return
	}
	target, err := k.execTarget(ns, name, types.UID(uid), container)
	if err != nil {
		code := http.StatusBadRequest
		if errors.Is(err, ErrPodNotFound) {
			code = http.StatusNotFound
		}
		http.Error(w, err.Error(), code)
		return
	}
	if !k.beginExec() {
		http.Error(w, "kubelet stopping", http.StatusServiceUnavailable)
		return
	}
	defer k.endExec()
	k.log.Info("exec", "pod", ns+"/"+name, "container", container, "command", cmd, "tty", opts.TTY, "stdin", opts.Stdin)
	remotecommand.ServeExec(w, r, podExecutor{k: k, target: target}, name, uid, container, cmd, opts,
		execIdleTimeout, execStreamsTimeout, remotecommand.SupportedStreamingProtocols)
}

// execTarget finds the running container ns/name/container (of UID uid
// when not empty).
func (k *kubelet) execTarget(ns, name string, uid types.UID, container string) (execTarget, error) {
	pod, c, err := k.podContainer(ns, name, container)
	if err != nil {
		return execTarget{}, err
	}
	if uid != "" && uid != pod.UID {
		return execTarget{}, fmt.Errorf("%w: pod %s/%s has UID %s, not %s", ErrPodNotFound, ns, name, pod.UID, uid)
	}
	rt := k.runtime(ns + "/" + name)
	if rt == nil || rt.uid != pod.UID || rt.execCtx.Err() != nil {
		return execTarget{}, fmt.Errorf("%w: pod %s/%s is not running on node %s (phase %s)", ErrContainerNotRunning, ns, name, k.cfg.NodeName, pod.Status.Phase)
	}
	if cr := rt.container(container); cr == nil || !cr.running() {
		return execTarget{}, fmt.Errorf("%w: container %q of pod %s/%s is not running", ErrContainerNotRunning, container, ns, name)
	}
	cr := rt.container(container)
	env := execEnv(pod, c)
	if e := cr.env.Load(); e != nil {
		env = *e
	}
	target := execTarget{netns: rt.sandbox.Netns, env: env, done: rt.execCtx}
	if p := cr.current.Load(); p != nil && cr.mountNS.Load() {
		target.pid = p.pid
	}
	return target, nil
}

// podContainer returns the pod ns/name bound to this node, from the
// informer's cache, and its container.
func (k *kubelet) podContainer(ns, name, container string) (*corev1.Pod, *corev1.Container, error) {
	var pod *corev1.Pod
	if k.store != nil {
		if obj, ok, _ := k.store.GetByKey(ns + "/" + name); ok {
			pod, _ = obj.(*corev1.Pod)
		}
	}
	if pod == nil || pod.Spec.NodeName != k.cfg.NodeName {
		return nil, nil, fmt.Errorf("%w: pod %q does not exist on node %s", ErrPodNotFound, ns+"/"+name, k.cfg.NodeName)
	}
	for i := range pod.Spec.Containers {
		if pod.Spec.Containers[i].Name == container {
			return pod, &pod.Spec.Containers[i], nil
		}
	}
	return nil, nil, fmt.Errorf("%w: container %q not found in pod %q", ErrPodNotFound, container, ns+"/"+name)
}

// execEnv returns the environment of a command exec'd into container c
// before its environment was built: PATH, HOSTNAME (the pod's name), HOME,
// and the container's literal env values. Once a run started, exec'd
// commands get that run's environment instead.
func execEnv(pod *corev1.Pod, c *corev1.Container) []string {
	env := []string{"PATH=" + execPath, "HOSTNAME=" + pod.Name, "HOME=/root"}
	for _, e := range c.Env {
		if e.ValueFrom == nil && e.Name != "" {
			env = append(env, e.Name+"="+e.Value)
		}
	}
	return env
}

// podExecutor runs exec'd commands in one target; it implements
// remotecommand.Executor.
type podExecutor struct {
	k      *kubelet
	target execTarget
}

// ExecInContainer implements remotecommand.Executor. A non-zero exit is
// returned as a utilexec.ExitError, which the protocol sends to kubectl as
// the exit code.
func (e podExecutor) ExecInContainer(ctx context.Context, _, _, _ string, cmd []string, in io.Reader, out, errw io.WriteCloser,
	tty bool, resize <-chan remotecommand.TerminalSize, _ time.Duration) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	stop := context.AfterFunc(e.target.done, cancel)
	defer stop()
	if _, err := lookPath(cmd[0], execPath); err != nil {
		return err
	}
	spec := execSpec{
		Argv:   append(e.k.enterPrefix(e.target.netns, e.target.pid > 0, e.target.pid), cmd...),
		Env:    e.target.env,
		Stdin:  in,
		Stdout: asWriter(out),
		Stderr: asWriter(errw),
		TTY:    tty,
		Resize: resize,
	}
	if tty {
		spec.Env = append(spec.Env, "TERM=xterm")
	}
	code, err := e.k.runExec(ctx, spec)
	if err != nil {
		return err
	}
	if code != 0 {
		return utilexec.CodeExitError{Err: fmt.Errorf("command terminated with exit code %d", code), Code: code}
	}
	return nil
}

// asWriter returns w, or a nil io.Writer when w is a nil interface.
func asWriter(w io.WriteCloser) io.Writer {
	if w == nil {
		return nil
	}
	return w
}

// netnsExecPrefix is the argv prefix that runs a command in netns.
func netnsExecPrefix(netns string) []string { return []string{"ip", "netns", "exec", netns} }

// lookPath finds file in the colon-separated dirs of path (or checks it
// when it holds a slash), with the error a container runtime gives.
func lookPath(file, path string) (string, error) {
	isExec := func(p string) bool {
		fi, err := os.Stat(p)
		return err == nil && fi.Mode().IsRegular() && fi.Mode().Perm()&0o111 != 0
	}
	if strings.Contains(file, "/") {
		if isExec(file) {
			return file, nil
		}
		return "", fmt.Errorf("exec: %q: no such executable file", file)
	}
	for _, dir := range filepath.SplitList(path) {
		if p := filepath.Join(dir, file); dir != "" && isExec(p) {
			return p, nil
		}
	}
	return "", fmt.Errorf("exec: %q: executable file not found in $PATH", file)
}

// beginExec counts an exec session in, unless the kubelet is stopping.
func (k *kubelet) beginExec() bool {
	k.execMu.Lock()
	defer k.execMu.Unlock()
	if k.execClosed {
		return false
	}
	k.execWG.Add(1)
	return true
}

// endExec counts an exec session out.
func (k *kubelet) endExec() { k.execWG.Done() }

// closeExecs refuses new exec sessions and waits for the running ones
// (killed by then: their pods are torn down).
func (k *kubelet) closeExecs() {
	k.execMu.Lock()
	k.execClosed = true
	k.execMu.Unlock()
	k.execWG.Wait()
}
