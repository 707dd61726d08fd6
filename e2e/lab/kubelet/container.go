package kubelet

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strconv"
	"sync/atomic"
	"time"

	corev1 "k8s.io/api/core/v1"
)

// Restart backoff of a container that exited: 1 s, doubling, at most 10 s.
const (
	restartBackoffBase = time.Second
	restartBackoffMax  = 10 * time.Second
	stopGrace          = 3 * time.Second
	// configRetryInterval is the wait before building the environment of
	// a container again after CreateContainerConfigError.
	configRetryInterval = 2 * time.Second
)

// containerRuntime is one container of a pod: a workload process and its
// restart history. Only the pod's reconcile touches it.
type containerRuntime struct {
	name, image string
	spec        corev1.Container
	plan        workloadPlan
	// host, when not nil, is the image configuration of a container that
	// runs its own command as a host program (hostImage); plan is unused
	// then.
	host      *imageConfig
	readyFile string   // built-in workloads: created once their ports are bound
	proc      *process // current run, nil when not running
	// current is the last run started, for the kubelet API's goroutines
	// (proc is the reconcile's own view).
	current   atomic.Pointer[process]
	startedAt time.Time
	bound     bool // the run's ports are bound (built-ins) or it started (host programs)
	ready     bool
	// The probers of the current run; nil without the probe.
	readiness, liveness *prober
	restarts            int32
	id                  string
	waiting             string    // reason while waiting to restart
	waitingMsg          string    // its message (CreateContainerConfigError: why)
	configErr           time.Time // when the environment last failed to build
	// env is the environment of the current run, which exec'd commands get.
	env atomic.Pointer[[]string]
	// mountNS is set when the runs have their own mounts (volumes): exec'd
	// commands and exec probes enter the run's mount namespace then.
	mountNS    atomic.Bool
	exitedAt   time.Time // of the last run, for the backoff
	lastExit   *exitInfo // last run, after a restart
	terminated *exitInfo // final run: the container will not restart
}

// startContainer starts a new run of c inside the pod's netns. A process
// that cannot start counts as a run that exited with status 127.
func (k *kubelet) startContainer(rt *podRuntime, c *containerRuntime) {
	if c.readyFile != "" {
		_ = os.Remove(c.readyFile)
	}
	now := k.now()
	c.id = fmt.Sprintf("kilofed-lab://%s-%s-%d", shortUID(rt.uid), c.name, c.restarts)
	c.startedAt, c.bound, c.ready, c.waiting, c.waitingMsg = now, false, false, "", ""
	c.readiness, c.liveness = nil, nil
	spec, err := k.containerProcess(rt, c)
	if errors.Is(err, ErrContainerConfig) {
		// As a kubelet does: no run, the container waits and is tried again.
		k.log.Warn("container config error", "pod", rt.key, "container", c.name, "err", err)
		c.proc, c.waiting, c.waitingMsg, c.configErr = nil, "CreateContainerConfigError", err.Error(), now
		c.current.Store(nil)
		return
	}
	var p *process
	if err == nil {
		p, err = k.start(spec)
	}
	if err != nil {
		k.log.Error("container start failed", "pod", rt.key, "container", c.name, "err", err)
		appendLog(k.logPath(rt.namespace, rt.name, c.name), now, spec.Argv, "kubelet stand-in: "+err.Error()+"\n")
		p = exitedProcess(127, now)
	} else if c.host != nil {
		k.log.Info("container started", "pod", rt.key, "container", c.name, "argv", spec.Argv, "pid", p.pid)
	} else {
		k.log.Info("container started", "pod", rt.key, "container", c.name, "workload", c.plan.Kind, "ports", c.plan.Ports, "pid", p.pid)
	}
	c.proc = p
	c.current.Store(p)
	key, queue := rt.key, k.queue
	go func() {
		<-p.done
		queue.Add(key)
	}()
	if err == nil {
		k.startProbers(rt, c, p, spec.Env)
	}
}

// startProbers starts the readiness and liveness probes of run p of c: a
// readiness change makes the pod be looked at again, a liveness failure
// stops the run (which then restarts per the restartPolicy).
func (k *kubelet) startProbers(rt *podRuntime, c *containerRuntime, p *process, env []string) {
	if e := c.env.Load(); e != nil {
		env = *e
	}
	t := probeTarget{netns: rt.sandbox.Netns, ports: c.spec.Ports, env: env, prefix: k.enterPrefix(rt.sandbox.Netns, c.mountNS.Load(), p.pid)}
	if len(rt.sandbox.IPs) > 0 {
		t.podIP = rt.sandbox.IPs[0].String()
	}
	key, name := rt.key, c.name
	c.readiness = newProber(readinessProbe, c.spec.ReadinessProbe, t, func(ok bool, why string) {
		k.log.Info("readiness changed", "pod", key, "container", name, "ready", ok, "reason", why)
		k.queue.Add(key)
	})
	c.liveness = newProber(livenessProbe, c.spec.LivenessProbe, t, func(ok bool, why string) {
		if ok {
			return
		}
		k.log.Info("liveness probe failed, stopping the container", "pod", key, "container", name, "reason", why)
		go func() { _ = p.stop(stopGrace) }()
	})
	for _, pr := range []*prober{c.readiness, c.liveness} {
		if pr != nil {
			go k.runProber(pr, p.done)
		}
	}
}

// containerProcess returns the process of a new run of c: its own command
// (host images) or its built-in workload, in the pod's netns.
func (k *kubelet) containerProcess(rt *podRuntime, c *containerRuntime) (processSpec, error) {
	logPath := k.logPath(rt.namespace, rt.name, c.name)
	prefix := netnsExecPrefix(rt.sandbox.Netns)
	env, err := k.containerEnv(k.runCtx, rt, &c.spec)
	if err != nil {
		return processSpec{}, err
	}
	c.env.Store(&env)
	if c.host == nil {
		id := podIdentity{Pod: rt.name, Namespace: rt.namespace, Cluster: k.cfg.Cluster, Node: k.cfg.NodeName}
		argv := append(append(prefix, k.cfg.WorkloadCommand...), c.plan.args(id, c.readyFile)...)
		return processSpec{Argv: argv, Env: append(os.Environ(), id.env()...), LogPath: logPath}, nil
	}
	argv := containerArgv(*c.host, &c.spec, envMap(env))
	if len(argv) == 0 {
		return processSpec{}, fmt.Errorf("container %q of image %s has no command: give command or args", c.name, c.image)
	}
	if _, err := lookPath(argv[0], envMap(env)["PATH"]); err != nil {
		return processSpec{}, fmt.Errorf("container %q: %w", c.name, err)
	}
	vols, mounts := withServiceAccountVolume(rt.pod, &c.spec)
	if err := k.setupVolumes(k.runCtx, rt, vols); err != nil {
		return processSpec{}, err
	}
	k.startTokenRenewal(rt)
	binds, err := rt.containerBinds(mounts)
	if err != nil {
		return processSpec{}, err
	}
	if len(binds) > 0 {
		c.mountNS.Store(true)
		pre := append(append([]string{}, k.cfg.WorkloadCommand...), "mount-exec")
		for _, b := range binds {
			pre = append(pre, "--bind", b)
		}
		argv = append(append(pre, "--"), argv...)
	}
	dir := c.spec.WorkingDir
	if dir == "" {
		dir = "/"
	}
	return processSpec{Argv: append(prefix, argv...), Env: env, Dir: dir, LogPath: logPath}, nil
}

// syncContainer records an exit, restarts per policy after a backoff, and
// notices readiness. It returns when the pod should be looked at again (0:
// only on the next event).
func (k *kubelet) syncContainer(rt *podRuntime, c *containerRuntime, policy corev1.RestartPolicy) time.Duration {
	if c.proc != nil {
		select {
		case <-c.proc.done:
			exit := exitInfo{ExitCode: c.proc.exitCode, StartedAt: c.startedAt, FinishedAt: c.proc.finishedAt}
			c.proc, c.ready = nil, false
			restart := shouldRestart(policy, exit.ExitCode)
			k.log.Info("container exited", "pod", rt.key, "container", c.name, "exitCode", exit.ExitCode, "restart", restart)
			if !restart {
				c.terminated = &exit
				return 0
			}
			c.lastExit, c.exitedAt, c.waiting = &exit, exit.FinishedAt, "CrashLoopBackOff"
		default:
			if !c.bound {
				if c.readyFile != "" {
					if _, err := os.Stat(c.readyFile); err != nil {
						return readyPollInterval
					}
				}
				c.bound = true
			}
			c.ready = c.readiness == nil || c.readiness.verdict.Load()
			return 0
		}
	}
	if c.terminated != nil {
		return 0
	}
	if !c.configErr.IsZero() {
		if wait := configRetryInterval - k.now().Sub(c.configErr); wait > 0 {
			return wait
		}
		c.configErr = time.Time{}
		k.startContainer(rt, c)
		return readyPollInterval
	}
	if wait := restartBackoff(c.restarts) - k.now().Sub(c.exitedAt); wait > 0 {
		return wait
	}
	c.restarts++
	k.startContainer(rt, c)
	return readyPollInterval
}

// stopContainer stops the current run of c, if any.
func (k *kubelet) stopContainer(rt *podRuntime, c *containerRuntime) {
	if c.proc != nil {
		if err := c.proc.stop(stopGrace); err != nil {
			k.log.Error("container stop failed", "pod", rt.key, "container", c.name, "pid", c.proc.pid, "err", err)
		}
	}
	if c.readyFile != "" {
		_ = os.Remove(c.readyFile)
	}
}

// running reports whether the last run of c is still going on; safe from
// any goroutine.
func (c *containerRuntime) running() bool {
	p := c.current.Load()
	if p == nil {
		return false
	}
	select {
	case <-p.done:
		return false
	default:
		return true
	}
}

// shouldRestart applies a pod restart policy to an exit status.
func shouldRestart(policy corev1.RestartPolicy, exitCode int32) bool {
	switch policy {
	case corev1.RestartPolicyNever:
		return false
	case corev1.RestartPolicyOnFailure:
		return exitCode != 0
	default: // Always, the API default
		return true
	}
}

// restartBackoff is the wait before restart number n+1.
func restartBackoff(n int32) time.Duration {
	if n >= 4 {
		return restartBackoffMax
	}
	return min(restartBackoffBase<<n, restartBackoffMax)
}

// snapshot returns the pod's state for podStatus.
func (rt *podRuntime) snapshot() podSnapshot {
	s := podSnapshot{PodIPs: rt.sandbox.IPs, HostIPs: rt.hostIPs, StartTime: rt.startTime}
	for _, c := range rt.containers {
		cs := containerSnapshot{
			Name: c.name, Image: c.image, ID: c.id, RestartCount: c.restarts,
			Terminated: c.terminated, LastTerminated: c.lastExit,
		}
		switch {
		case c.proc != nil:
			cs.Running, cs.StartedAt, cs.Ready = true, c.startedAt, c.ready
		case c.terminated == nil:
			cs.Waiting, cs.WaitingMessage = c.waiting, c.waitingMsg
		}
		s.Containers = append(s.Containers, cs)
	}
	return s
}

// appendLog writes a run that never started into a container log: its run
// marker and msg, so that `kubectl logs` tells why.
func appendLog(path string, at time.Time, argv []string, msg string) {
	f, err := os.OpenFile(path, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return
	}
	defer f.Close()
	_, _ = f.WriteString(runMarker(at, argv) + msg)
}

// enterPrefix is the argv prefix that runs a command in a container: in
// its netns, and also in the mount namespace of its process pid when the
// container has its own mounts.
func (k *kubelet) enterPrefix(netns string, mountNS bool, pid int) []string {
	if mountNS && pid > 0 {
		return []string{"nsenter", "--target", strconv.Itoa(pid), "--mount", "--net", "--"}
	}
	return k.execPrefix(netns)
}

// startTokenRenewal starts renewing the pod's service account tokens
// (once per pod), until the pod is torn down.
func (k *kubelet) startTokenRenewal(rt *podRuntime) {
	if rt.stopTokens != nil || len(rt.volumes.tokens) == 0 {
		return
	}
	ctx, cancel := context.WithCancel(rt.execCtx)
	rt.stopTokens = cancel
	tokens := append([]tokenFile{}, rt.volumes.tokens...)
	go k.renewTokens(ctx, rt, tokens)
}
