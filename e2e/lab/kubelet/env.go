package kubelet

import (
	"context"
	"errors"
	"fmt"
	"math"
	"net"
	"net/netip"
	"slices"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
)

// ErrContainerConfig means a container's environment could not be built:
// a ConfigMap, Secret or key it needs (and does not mark optional) is
// missing, or a reference is not one Kubernetes allows. The container
// waits with reason CreateContainerConfigError and is tried again.
var ErrContainerConfig = errors.New("container config")

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

// envInput is what a container's environment is made of besides its spec.
type envInput struct {
	pod             *corev1.Pod
	podIPs, hostIPs []netip.Addr        // the pod's, IPv4 first
	allocatable     corev1.ResourceList // the node's: the value of unset limits
	// kubernetes is the default/kubernetes Service; nil when there is none.
	kubernetes *corev1.Service
}

// buildEnv returns the environment of container c as the kubelet builds it:
// PATH, HOSTNAME (the pod's name) and HOME; the kubernetes Service's
// KUBERNETES_SERVICE_HOST/PORT variables; envFrom in order (a later source
// wins); then env in order, literal values $(VAR)-expanded from what
// precedes them, valueFrom resolved (fieldRef, resourceFieldRef,
// configMapKeyRef, secretKeyRef). get reads ConfigMaps and Secrets.
func buildEnv(ctx context.Context, get objectGetter, in envInput, c *corev1.Container) ([]string, error) {
	var env envList
	env.Set("PATH", execPath)
	env.Set("HOSTNAME", in.pod.Name)
	env.Set("HOME", "/root")
	for _, kv := range serviceEnv(in.kubernetes) {
		n, v, _ := strings.Cut(kv, "=")
		env.Set(n, v)
	}
	ns := in.pod.Namespace
	for _, from := range c.EnvFrom {
		var data map[string]string
		switch {
		case from.ConfigMapRef != nil:
			cm, err := get.configMap(ctx, ns, from.ConfigMapRef.Name)
			if err != nil {
				if apierrors.IsNotFound(err) && ptrTrue(from.ConfigMapRef.Optional) {
					continue
				}
				return nil, fmt.Errorf("%w: envFrom configmap %q: %w", ErrContainerConfig, from.ConfigMapRef.Name, err)
			}
			data = cm.Data
		case from.SecretRef != nil:
			s, err := get.secret(ctx, ns, from.SecretRef.Name)
			if err != nil {
				if apierrors.IsNotFound(err) && ptrTrue(from.SecretRef.Optional) {
					continue
				}
				return nil, fmt.Errorf("%w: envFrom secret %q: %w", ErrContainerConfig, from.SecretRef.Name, err)
			}
			data = map[string]string{}
			for k, v := range s.Data {
				data[k] = string(v)
			}
		}
		keys := make([]string, 0, len(data))
		for k := range data {
			keys = append(keys, k)
		}
		slices.Sort(keys)
		for _, k := range keys {
			if name := from.Prefix + k; validEnvName(name) {
				env.Set(name, data[k])
			}
		}
	}
	for _, e := range c.Env {
		if e.Name == "" {
			continue
		}
		if e.ValueFrom == nil {
			env.Set(e.Name, expandVars(e.Value, env.values))
			continue
		}
		v, ok, err := envValueFrom(ctx, get, in, c, e.ValueFrom)
		if err != nil {
			return nil, fmt.Errorf("%w: env %s: %w", ErrContainerConfig, e.Name, err)
		}
		if ok {
			env.Set(e.Name, v)
		}
	}
	return env.Environ(), nil
}

// validEnvName reports whether name may be an environment variable name:
// printable ASCII without '='.
func validEnvName(name string) bool {
	if name == "" {
		return false
	}
	for _, r := range name {
		if r < ' ' || r > '~' || r == '=' {
			return false
		}
	}
	return true
}

// envValueFrom resolves one valueFrom; ok is false when an optional
// reference is missing (the variable is then not set).
func envValueFrom(ctx context.Context, get objectGetter, in envInput, c *corev1.Container, from *corev1.EnvVarSource) (string, bool, error) {
	ns := in.pod.Namespace
	switch {
	case from.FieldRef != nil:
		v, err := podFieldValue(in, from.FieldRef.FieldPath)
		return v, err == nil, err
	case from.ResourceFieldRef != nil:
		v, err := resourceFieldValue(in, c, from.ResourceFieldRef)
		return v, err == nil, err
	case from.ConfigMapKeyRef != nil:
		ref := from.ConfigMapKeyRef
		cm, err := get.configMap(ctx, ns, ref.Name)
		if err != nil {
			if apierrors.IsNotFound(err) && ptrTrue(ref.Optional) {
				return "", false, nil
			}
			return "", false, fmt.Errorf("configmap %q: %w", ref.Name, err)
		}
		v, ok := cm.Data[ref.Key]
		if !ok {
			if ptrTrue(ref.Optional) {
				return "", false, nil
			}
			return "", false, fmt.Errorf("couldn't find key %s in ConfigMap %s/%s", ref.Key, ns, ref.Name)
		}
		return v, true, nil
	case from.SecretKeyRef != nil:
		ref := from.SecretKeyRef
		s, err := get.secret(ctx, ns, ref.Name)
		if err != nil {
			if apierrors.IsNotFound(err) && ptrTrue(ref.Optional) {
				return "", false, nil
			}
			return "", false, fmt.Errorf("secret %q: %w", ref.Name, err)
		}
		v, ok := s.Data[ref.Key]
		if !ok {
			if ptrTrue(ref.Optional) {
				return "", false, nil
			}
			return "", false, fmt.Errorf("couldn't find key %s in Secret %s/%s", ref.Key, ns, ref.Name)
		}
		return string(v), true, nil
	}
	return "", false, nil // names no source: the API server refuses that; nothing to set
}

// podFieldValue returns the downward API value of a fieldRef path.
func podFieldValue(in envInput, path string) (string, error) {
	pod := in.pod
	if key, ok := subscript(path, "metadata.labels"); ok {
		return pod.Labels[key], nil
	}
	if key, ok := subscript(path, "metadata.annotations"); ok {
		return pod.Annotations[key], nil
	}
	joined := func(ips []netip.Addr) string {
		s := make([]string, len(ips))
		for i, ip := range ips {
			s[i] = ip.String()
		}
		return strings.Join(s, ",")
	}
	first := func(ips []netip.Addr) string {
		if len(ips) == 0 {
			return ""
		}
		return ips[0].String()
	}
	switch path {
	case "metadata.name":
		return pod.Name, nil
	case "metadata.namespace":
		return pod.Namespace, nil
	case "metadata.uid":
		return string(pod.UID), nil
	case "spec.nodeName":
		return pod.Spec.NodeName, nil
	case "spec.serviceAccountName":
		return pod.Spec.ServiceAccountName, nil
	case "status.podIP":
		return first(in.podIPs), nil
	case "status.podIPs":
		return joined(in.podIPs), nil
	case "status.hostIP":
		return first(in.hostIPs), nil
	case "status.hostIPs":
		return joined(in.hostIPs), nil
	}
	return "", fmt.Errorf("fieldRef %q is not supported", path)
}

// subscript reads "<field>['key']" and returns key.
func subscript(path, field string) (string, bool) {
	rest, ok := strings.CutPrefix(path, field+"['")
	if !ok {
		return "", false
	}
	return strings.CutSuffix(rest, "']")
}

// resourceFieldValue returns a resourceFieldRef's value: the limit or
// request of the named container (this one by default) divided by the
// divisor (1 by default) and rounded up; an unset limit is the node's
// allocatable amount, an unset request 0.
func resourceFieldValue(in envInput, c *corev1.Container, ref *corev1.ResourceFieldSelector) (string, error) {
	target := c
	if ref.ContainerName != "" && ref.ContainerName != c.Name {
		target = nil
		for i := range in.pod.Spec.Containers {
			if in.pod.Spec.Containers[i].Name == ref.ContainerName {
				target = &in.pod.Spec.Containers[i]
			}
		}
		if target == nil {
			return "", fmt.Errorf("resourceFieldRef: no container %q", ref.ContainerName)
		}
	}
	kind, name, ok := strings.Cut(ref.Resource, ".")
	if !ok || (kind != "limits" && kind != "requests") {
		return "", fmt.Errorf("resourceFieldRef: unsupported resource %q", ref.Resource)
	}
	rn := corev1.ResourceName(name)
	var q resource.Quantity
	if kind == "limits" {
		l, set := target.Resources.Limits[rn]
		if !set {
			l = in.allocatable[rn]
		}
		q = l
	} else {
		q = target.Resources.Requests[rn]
	}
	divisor := ref.Divisor
	if divisor.IsZero() {
		divisor = resource.MustParse("1")
	}
	switch {
	case rn == corev1.ResourceCPU:
		return strconv.FormatInt(int64(math.Ceil(float64(q.MilliValue())/float64(divisor.MilliValue()))), 10), nil
	case rn == corev1.ResourceMemory || rn == corev1.ResourceEphemeralStorage || strings.HasPrefix(name, "hugepages-"):
		return strconv.FormatInt(int64(math.Ceil(float64(q.Value())/float64(divisor.Value()))), 10), nil
	}
	return "", fmt.Errorf("resourceFieldRef: unsupported resource %q", ref.Resource)
}

// serviceEnv returns the variables the kubelet gives every container for
// the kubernetes Service (docker links style): KUBERNETES_SERVICE_HOST,
// KUBERNETES_SERVICE_PORT, KUBERNETES_SERVICE_PORT_<NAME> and
// KUBERNETES_PORT*.
func serviceEnv(svc *corev1.Service) []string {
	if svc == nil || svc.Spec.ClusterIP == "" || svc.Spec.ClusterIP == corev1.ClusterIPNone || len(svc.Spec.Ports) == 0 {
		return nil
	}
	prefix := strings.ToUpper(strings.ReplaceAll(svc.Name, "-", "_"))
	ip := svc.Spec.ClusterIP
	first := svc.Spec.Ports[0]
	env := []string{
		prefix + "_SERVICE_HOST=" + ip,
		prefix + "_SERVICE_PORT=" + strconv.Itoa(int(first.Port)),
	}
	for _, p := range svc.Spec.Ports {
		if p.Name != "" {
			env = append(env, prefix+"_SERVICE_PORT_"+strings.ToUpper(strings.ReplaceAll(p.Name, "-", "_"))+"="+strconv.Itoa(int(p.Port)))
		}
	}
	proto := func(p corev1.ServicePort) string {
		if p.Protocol == "" {
			return "tcp"
		}
		return strings.ToLower(string(p.Protocol))
	}
	url := func(p corev1.ServicePort) string {
		return proto(p) + "://" + net.JoinHostPort(ip, strconv.Itoa(int(p.Port)))
	}
	env = append(env, prefix+"_PORT="+url(first))
	for _, p := range svc.Spec.Ports {
		base := prefix + "_PORT_" + strconv.Itoa(int(p.Port)) + "_" + strings.ToUpper(proto(p))
		env = append(env, base+"="+url(p), base+"_PROTO="+proto(p), base+"_PORT="+strconv.Itoa(int(p.Port)), base+"_ADDR="+ip)
	}
	return env
}

// ptrTrue reports whether b is set and true.
func ptrTrue(b *bool) bool { return b != nil && *b }

// objectGetter reads the objects a container's environment refers to.
type objectGetter interface {
	configMap(ctx context.Context, ns, name string) (*corev1.ConfigMap, error)
	secret(ctx context.Context, ns, name string) (*corev1.Secret, error)
}

// clientGetter reads objects with a clientset.
type clientGetter struct{ c kubernetes.Interface }

func (g clientGetter) configMap(ctx context.Context, ns, name string) (*corev1.ConfigMap, error) {
	return g.c.CoreV1().ConfigMaps(ns).Get(ctx, name, metav1.GetOptions{})
}

func (g clientGetter) secret(ctx context.Context, ns, name string) (*corev1.Secret, error) {
	return g.c.CoreV1().Secrets(ns).Get(ctx, name, metav1.GetOptions{})
}

// containerEnv builds the environment of a new run of container c of rt.
func (k *kubelet) containerEnv(ctx context.Context, rt *podRuntime, c *corev1.Container) ([]string, error) {
	in := envInput{pod: rt.pod, podIPs: rt.sandbox.IPs, hostIPs: rt.hostIPs, allocatable: nodeCapacity}
	if svc, err := k.cfg.Client.CoreV1().Services(metav1.NamespaceDefault).Get(ctx, "kubernetes", metav1.GetOptions{}); err == nil {
		in.kubernetes = svc
	} else if !apierrors.IsNotFound(err) {
		return nil, fmt.Errorf("read the kubernetes Service: %w", err)
	}
	return buildEnv(ctx, clientGetter{k.cfg.Client}, in, c)
}
