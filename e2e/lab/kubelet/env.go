package kubelet

import (
	"strings"

	corev1 "k8s.io/api/core/v1"
)

// envList is an ordered environment where a later Set of a name replaces
// the earlier value in place.
type envList struct {
	names  []string
	values map[string]string
}

// Set defines name=value.
func (e *envList) Set(name, value string) {
	if e.values == nil {
		e.values = map[string]string{}
	}
	if _, ok := e.values[name]; !ok {
		e.names = append(e.names, name)
	}
	e.values[name] = value
}

// Environ returns the list as NAME=value strings.
func (e *envList) Environ() []string {
	out := make([]string, 0, len(e.names))
	for _, n := range e.names {
		out = append(out, n+"="+e.values[n])
	}
	return out
}

// envMap returns the NAME=value strings of env as a map (a later entry wins).
func envMap(env []string) map[string]string {
	m := make(map[string]string, len(env))
	for _, kv := range env {
		if n, v, ok := strings.Cut(kv, "="); ok {
			m[n] = v
		}
	}
	return m
}

// containerEnv returns the environment of a container that runs its own
// command: PATH, HOSTNAME (the pod's name) and HOME, then the container's
// env, whose literal values are $(VAR)-expanded from what precedes them.
func containerEnv(pod *corev1.Pod, c *corev1.Container) []string {
	var env envList
	env.Set("PATH", execPath)
	env.Set("HOSTNAME", pod.Name)
	env.Set("HOME", "/root")
	for _, e := range c.Env {
		if e.Name == "" || e.ValueFrom != nil {
			continue
		}
		env.Set(e.Name, expandVars(e.Value, env.values))
	}
	return env.Environ()
}
