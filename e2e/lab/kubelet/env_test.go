package kubelet

import (
	"context"
	"errors"
	"net/netip"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/utils/ptr"
)

// mapGetter serves ConfigMaps and Secrets of namespace "ns" from maps.
type mapGetter struct {
	cms     map[string]map[string]string
	secrets map[string]map[string][]byte
}

func (g mapGetter) configMap(_ context.Context, ns, name string) (*corev1.ConfigMap, error) {
	if d, ok := g.cms[name]; ok && ns == "ns" {
		return &corev1.ConfigMap{Data: d}, nil
	}
	return nil, apierrors.NewNotFound(schema.GroupResource{Resource: "configmaps"}, name)
}

func (g mapGetter) secret(_ context.Context, ns, name string) (*corev1.Secret, error) {
	if d, ok := g.secrets[name]; ok && ns == "ns" {
		return &corev1.Secret{Data: d}, nil
	}
	return nil, apierrors.NewNotFound(schema.GroupResource{Resource: "secrets"}, name)
}

func TestBuildEnv(t *testing.T) {
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "p", Namespace: "ns", UID: "uid-1",
			Labels: map[string]string{"app": "hello", "tier": "web"}, Annotations: map[string]string{"note": "n1"}},
		Spec: corev1.PodSpec{NodeName: "node-a", ServiceAccountName: "sa",
			Containers: []corev1.Container{{Name: "c"}, {Name: "side", Resources: corev1.ResourceRequirements{
				Limits: corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("64Mi")}}}}},
	}
	in := envInput{
		pod:         pod,
		podIPs:      []netip.Addr{netip.MustParseAddr("10.42.0.5"), netip.MustParseAddr("fd42::5")},
		hostIPs:     []netip.Addr{netip.MustParseAddr("10.0.1.10"), netip.MustParseAddr("fd00::10")},
		allocatable: nodeCapacity,
		kubernetes: &corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: "kubernetes"},
			Spec: corev1.ServiceSpec{ClusterIP: "10.96.0.1", Ports: []corev1.ServicePort{{Name: "https", Port: 443, Protocol: corev1.ProtocolTCP}}}},
	}
	get := mapGetter{
		cms:     map[string]map[string]string{"cfg": {"mode": "fast", "level": "3"}, "more": {"mode": "slow"}},
		secrets: map[string]map[string][]byte{"sec": {"token": []byte("s3cret")}},
	}
	field := func(path string) *corev1.EnvVarSource {
		return &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{FieldPath: path}}
	}
	res := func(container, r, divisor string) *corev1.EnvVarSource {
		s := &corev1.ResourceFieldSelector{ContainerName: container, Resource: r}
		if divisor != "" {
			s.Divisor = resource.MustParse(divisor)
		}
		return &corev1.EnvVarSource{ResourceFieldRef: s}
	}
	cmKey := func(name, key string, optional bool) *corev1.EnvVarSource {
		return &corev1.EnvVarSource{ConfigMapKeyRef: &corev1.ConfigMapKeySelector{
			LocalObjectReference: corev1.LocalObjectReference{Name: name}, Key: key, Optional: ptr.To(optional)}}
	}
	secKey := func(name, key string, optional bool) *corev1.EnvVarSource {
		return &corev1.EnvVarSource{SecretKeyRef: &corev1.SecretKeySelector{
			LocalObjectReference: corev1.LocalObjectReference{Name: name}, Key: key, Optional: ptr.To(optional)}}
	}
	tests := []struct {
		name    string
		c       corev1.Container
		want    map[string]string // the variables checked
		absent  []string
		wantErr string
	}{
		{name: "literal values and expansion from earlier variables",
			c:    corev1.Container{Env: []corev1.EnvVar{{Name: "A", Value: "x"}, {Name: "B", Value: "$(A)-$(HOSTNAME)-$(LATER)"}, {Name: "LATER", Value: "l"}}},
			want: map[string]string{"A": "x", "B": "x-p-$(LATER)", "LATER": "l", "HOSTNAME": "p", "PATH": execPath, "HOME": "/root"}},
		{name: "fieldRef paths",
			c: corev1.Container{Env: []corev1.EnvVar{
				{Name: "NAME", ValueFrom: field("metadata.name")}, {Name: "NS", ValueFrom: field("metadata.namespace")},
				{Name: "UID", ValueFrom: field("metadata.uid")}, {Name: "APP", ValueFrom: field("metadata.labels['app']")},
				{Name: "NOTE", ValueFrom: field("metadata.annotations['note']")}, {Name: "NOLABEL", ValueFrom: field("metadata.labels['none']")},
				{Name: "NODE_NAME", ValueFrom: field("spec.nodeName")}, {Name: "SA", ValueFrom: field("spec.serviceAccountName")},
				{Name: "POD_IP", ValueFrom: field("status.podIP")}, {Name: "MY_POD_IPS", ValueFrom: field("status.podIPs")},
				{Name: "NODE_IP", ValueFrom: field("status.hostIP")}, {Name: "HOST_IPS", ValueFrom: field("status.hostIPs")},
			}},
			want: map[string]string{"NAME": "p", "NS": "ns", "UID": "uid-1", "APP": "hello", "NOTE": "n1", "NOLABEL": "",
				"NODE_NAME": "node-a", "SA": "sa", "POD_IP": "10.42.0.5", "MY_POD_IPS": "10.42.0.5,fd42::5",
				"NODE_IP": "10.0.1.10", "HOST_IPS": "10.0.1.10,fd00::10"}},
		{name: "unsupported fieldRef", c: corev1.Container{Env: []corev1.EnvVar{{Name: "X", ValueFrom: field("spec.hostname")}}},
			wantErr: `fieldRef "spec.hostname" is not supported`},
		{name: "resourceFieldRef limits, requests, divisors, node allocatable",
			c: corev1.Container{Name: "c", Resources: corev1.ResourceRequirements{
				Limits:   corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("1500m")},
				Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("250m"), corev1.ResourceMemory: resource.MustParse("100Mi")}},
				Env: []corev1.EnvVar{
					{Name: "CPU_LIMIT", ValueFrom: res("", "limits.cpu", "")},
					{Name: "CPU_LIMIT_M", ValueFrom: res("", "limits.cpu", "1m")},
					{Name: "CPU_REQ", ValueFrom: res("", "requests.cpu", "")},
					{Name: "MEM_REQ_MI", ValueFrom: res("", "requests.memory", "1Mi")},
					{Name: "MEM_LIMIT", ValueFrom: res("", "limits.memory", "")},
					{Name: "SIDE_MEM_MI", ValueFrom: res("side", "limits.memory", "1Mi")},
					{Name: "EPH_REQ", ValueFrom: res("", "requests.ephemeral-storage", "")},
				}},
			want: map[string]string{"CPU_LIMIT": "2", "CPU_LIMIT_M": "1500", "CPU_REQ": "1", "MEM_REQ_MI": "100",
				"MEM_LIMIT": "8589934592", "SIDE_MEM_MI": "64", "EPH_REQ": "0"}},
		{name: "resourceFieldRef of a missing container",
			c:       corev1.Container{Name: "c", Env: []corev1.EnvVar{{Name: "X", ValueFrom: res("nope", "limits.cpu", "")}}},
			wantErr: `no container "nope"`},
		{name: "configMapKeyRef and secretKeyRef, optional respected",
			c: corev1.Container{Env: []corev1.EnvVar{
				{Name: "MODE", ValueFrom: cmKey("cfg", "mode", false)},
				{Name: "TOKEN", ValueFrom: secKey("sec", "token", false)},
				{Name: "OPT_CM", ValueFrom: cmKey("absent", "k", true)},
				{Name: "OPT_KEY", ValueFrom: cmKey("cfg", "absent", true)},
				{Name: "OPT_SEC", ValueFrom: secKey("sec", "absent", true)},
			}},
			want: map[string]string{"MODE": "fast", "TOKEN": "s3cret"}, absent: []string{"OPT_CM", "OPT_KEY", "OPT_SEC"}},
		{name: "missing configmap", c: corev1.Container{Env: []corev1.EnvVar{{Name: "M", ValueFrom: cmKey("absent", "k", false)}}},
			wantErr: `configmap "absent"`},
		{name: "missing configmap key", c: corev1.Container{Env: []corev1.EnvVar{{Name: "M", ValueFrom: cmKey("cfg", "absent", false)}}},
			wantErr: "couldn't find key absent in ConfigMap ns/cfg"},
		{name: "missing secret key", c: corev1.Container{Env: []corev1.EnvVar{{Name: "M", ValueFrom: secKey("sec", "absent", false)}}},
			wantErr: "couldn't find key absent in Secret ns/sec"},
		{name: "envFrom in order with prefix, env overrides",
			c: corev1.Container{
				EnvFrom: []corev1.EnvFromSource{
					{ConfigMapRef: &corev1.ConfigMapEnvSource{LocalObjectReference: corev1.LocalObjectReference{Name: "cfg"}}},
					{ConfigMapRef: &corev1.ConfigMapEnvSource{LocalObjectReference: corev1.LocalObjectReference{Name: "more"}}},
					{Prefix: "S_", SecretRef: &corev1.SecretEnvSource{LocalObjectReference: corev1.LocalObjectReference{Name: "sec"}}},
					{ConfigMapRef: &corev1.ConfigMapEnvSource{LocalObjectReference: corev1.LocalObjectReference{Name: "absent"}, Optional: ptr.To(true)}},
				},
				Env: []corev1.EnvVar{{Name: "level", Value: "9-$(mode)"}}},
			want: map[string]string{"mode": "slow", "level": "9-slow", "S_token": "s3cret"}},
		{name: "envFrom of a missing secret",
			c:       corev1.Container{EnvFrom: []corev1.EnvFromSource{{SecretRef: &corev1.SecretEnvSource{LocalObjectReference: corev1.LocalObjectReference{Name: "absent"}}}}},
			wantErr: `envFrom secret "absent"`},
		{name: "kubernetes Service variables, overridable",
			c: corev1.Container{Env: []corev1.EnvVar{{Name: "KUBERNETES_SERVICE_PORT", Value: "6443"}}},
			want: map[string]string{"KUBERNETES_SERVICE_HOST": "10.96.0.1", "KUBERNETES_SERVICE_PORT": "6443",
				"KUBERNETES_SERVICE_PORT_HTTPS": "443", "KUBERNETES_PORT": "tcp://10.96.0.1:443",
				"KUBERNETES_PORT_443_TCP": "tcp://10.96.0.1:443", "KUBERNETES_PORT_443_TCP_PROTO": "tcp",
				"KUBERNETES_PORT_443_TCP_PORT": "443", "KUBERNETES_PORT_443_TCP_ADDR": "10.96.0.1"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			env, err := buildEnv(context.Background(), get, in, &tt.c)
			if tt.wantErr != "" {
				if err == nil || !errors.Is(err, ErrContainerConfig) || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("err = %v, want ErrContainerConfig with %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			m := envMap(env)
			if len(m) != len(env) {
				t.Errorf("env has duplicates: %q", env)
			}
			got := map[string]string{}
			for k := range tt.want {
				if v, ok := m[k]; ok {
					got[k] = v
				}
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("env (-want +got):\n%s", diff)
			}
			for _, k := range tt.absent {
				if v, ok := m[k]; ok {
					t.Errorf("%s=%q set, want it absent", k, v)
				}
			}
		})
	}
}

func TestServiceEnvIPv6(t *testing.T) {
	svc := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: "kubernetes"},
		Spec: corev1.ServiceSpec{ClusterIP: "fd96::1", Ports: []corev1.ServicePort{{Name: "https", Port: 443}}}}
	m := envMap(serviceEnv(svc))
	if m["KUBERNETES_PORT"] != "tcp://[fd96::1]:443" || m["KUBERNETES_SERVICE_HOST"] != "fd96::1" {
		t.Errorf("serviceEnv = %v", m)
	}
	if serviceEnv(nil) != nil {
		t.Error("no Service: want no variables")
	}
}

func TestReconcileWaitsOnContainerConfigErrorThenStarts(t *testing.T) {
	tk := newTestKubelet(t)
	ctx := context.Background()
	c := corev1.Container{Image: "nicolaka/netshoot", Command: []string{"sh", "-c", "echo $MODE"},
		Env: []corev1.EnvVar{{Name: "MODE", ValueFrom: &corev1.EnvVarSource{ConfigMapKeyRef: &corev1.ConfigMapKeySelector{
			LocalObjectReference: corev1.LocalObjectReference{Name: "cfg"}, Key: "mode"}}}}}
	tk.apply(t, reconcilePod("p", "u1", corev1.RestartPolicyAlways, c))
	if len(tk.procs.argv) != 0 {
		t.Fatalf("started %v without its ConfigMap", tk.procs.argv)
	}
	p, err := tk.cfg.Client.CoreV1().Pods("default").Get(ctx, "p", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	w := p.Status.ContainerStatuses[0].State.Waiting
	if w == nil || w.Reason != "CreateContainerConfigError" || !strings.Contains(w.Message, `configmap "cfg"`) {
		t.Fatalf("container state %+v, want waiting CreateContainerConfigError naming the configmap", p.Status.ContainerStatuses[0].State)
	}
	if p.Status.Phase != corev1.PodPending || conditionOf(p.Status, corev1.PodReady).Status != corev1.ConditionFalse {
		t.Errorf("phase %s, Ready %s; want Pending, not ready, while no container could start", p.Status.Phase, conditionOf(p.Status, corev1.PodReady).Status)
	}
	if _, err := tk.cfg.Client.CoreV1().ConfigMaps("default").Create(ctx, &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Name: "cfg"}, Data: map[string]string{"mode": "fast"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	tk.sync(t, "default/p") // before the retry interval: still waiting
	if len(tk.procs.argv) != 0 {
		t.Fatalf("retried before %v", configRetryInterval)
	}
	tk.clock = tk.clock.Add(configRetryInterval)
	tk.sync(t, "default/p")
	tk.sync(t, "default/p") // notices it runs
	if len(tk.procs.argv) != 1 || !strings.Contains(strings.Join(tk.procs.env[0], " "), "MODE=fast") {
		t.Fatalf("after the ConfigMap appeared: argv %v env %v", tk.procs.argv, tk.procs.env)
	}
	if got := tk.status(t, "default", "p"); !strings.Contains(got, "phase Running") || !strings.Contains(got, "container c ready=true restarts=0 running") {
		t.Errorf("status %s, want running with no restart counted", got)
	}
}
