package kubelet

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"strings"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
)

// ServiceAccountMountPath is where a container finds its service account
// token, ca.crt and namespace, as rest.InClusterConfig expects.
const ServiceAccountMountPath = "/var/run/secrets/kubernetes.io/serviceaccount"

// Token lifetimes: the ServiceAccount admission's default request, and the
// part of its life after which a token is renewed (a kubelet's 80%).
const (
	defaultTokenSeconds = 3607
	minTokenSeconds     = 600
	tokenRefreshAt      = 0.8
)

// hostPathPassthrough are the hostPath paths (and what is below them)
// that are this machine's own for every lab node: devices, kernel
// interfaces, modules and the iptables lock, which every node of a real
// cluster has too. Every other hostPath is under the node's own root
// (Config.RootDir/hostpath), so that nodes sharing this machine do not
// share /var/lib/kilo.
var hostPathPassthrough = []string{"/dev", "/proc", "/sys", "/lib/modules", "/usr/lib/modules", "/run/xtables.lock", "/var/run/xtables.lock"}

// hostPathSource returns the folder or file that hostPath p of a pod of
// this node is.
func (k *kubelet) hostPathSource(p string) string {
	p = path.Clean("/" + p)
	for _, x := range hostPathPassthrough {
		if p == x || strings.HasPrefix(p, x+"/") {
			return p
		}
	}
	return filepath.Join(k.rootDir, "hostpath", p)
}

// podVolumeDir is the folder of the volumes of pod uid.
func (k *kubelet) podVolumeDir(rt *podRuntime) string {
	return filepath.Join(k.rootDir, "pods", string(rt.uid))
}

// volumeSet is what the volumes of a pod are on this machine.
type volumeSet struct {
	paths  map[string]string // volume name -> host folder or file
	tokens []tokenFile       // to renew
}

// tokenFile is a service account token written into a volume.
type tokenFile struct {
	path     string
	source   corev1.ServiceAccountTokenProjection
	renewAt  time.Time
	issuedAt time.Time
}

// withServiceAccountVolume returns the pod's volumes and the mounts of
// container c, adding the token volume that the ServiceAccount admission
// adds to a pod (kube-api-access: token, ca.crt, namespace at
// ServiceAccountMountPath, read-only) when the API server did not, the pod
// names its ServiceAccount (the API server binds tokens only to pods of
// that account) and automountServiceAccountToken is not false.
func withServiceAccountVolume(pod *corev1.Pod, c *corev1.Container) ([]corev1.Volume, []corev1.VolumeMount) {
	vols, mounts := pod.Spec.Volumes, c.VolumeMounts
	if pod.Spec.ServiceAccountName == "" || (pod.Spec.AutomountServiceAccountToken != nil && !*pod.Spec.AutomountServiceAccountToken) {
		return vols, mounts
	}
	for _, m := range mounts {
		if path.Clean(m.MountPath) == ServiceAccountMountPath {
			return vols, mounts
		}
	}
	const name = "kube-api-access-kfl"
	vols = append(append([]corev1.Volume{}, vols...), corev1.Volume{Name: name, VolumeSource: corev1.VolumeSource{
		Projected: &corev1.ProjectedVolumeSource{DefaultMode: ptr.To[int32](0o644), Sources: []corev1.VolumeProjection{
			{ServiceAccountToken: &corev1.ServiceAccountTokenProjection{Path: "token", ExpirationSeconds: ptr.To[int64](defaultTokenSeconds)}},
			{ConfigMap: &corev1.ConfigMapProjection{LocalObjectReference: corev1.LocalObjectReference{Name: "kube-root-ca.crt"},
				Items: []corev1.KeyToPath{{Key: "ca.crt", Path: "ca.crt"}}}},
			{DownwardAPI: &corev1.DownwardAPIProjection{Items: []corev1.DownwardAPIVolumeFile{
				{Path: "namespace", FieldRef: &corev1.ObjectFieldSelector{FieldPath: "metadata.namespace"}}}}},
		}}}})
	mounts = append(append([]corev1.VolumeMount{}, mounts...), corev1.VolumeMount{Name: name, MountPath: ServiceAccountMountPath, ReadOnly: true})
	return vols, mounts
}

// setupVolumes makes the volumes of rt's pod (once per pod, the first
// time a container needs them): hostPath under the node's root,
// emptyDir, configMap, secret, downwardAPI and projected (service account
// token, configMap, secret, downwardAPI) folders under the pod's volume
// folder. Errors wrap ErrContainerConfig: the container waits and is
// tried again.
func (k *kubelet) setupVolumes(ctx context.Context, rt *podRuntime, vols []corev1.Volume) error {
	if rt.volumes.paths == nil {
		rt.volumes.paths = map[string]string{}
	}
	for _, v := range vols {
		if _, done := rt.volumes.paths[v.Name]; done {
			continue
		}
		p, err := k.setupVolume(ctx, rt, v)
		if err != nil {
			return fmt.Errorf("%w: volume %q: %w", ErrContainerConfig, v.Name, err)
		}
		rt.volumes.paths[v.Name] = p
	}
	return nil
}

// setupVolume makes one volume and returns its host path.
func (k *kubelet) setupVolume(ctx context.Context, rt *podRuntime, v corev1.Volume) (string, error) {
	dir := filepath.Join(k.podVolumeDir(rt), v.Name)
	switch {
	case v.HostPath != nil:
		return k.setupHostPath(v.HostPath)
	case v.ConfigMap != nil:
		return dir, k.writeConfigMap(ctx, rt, dir, v.ConfigMap.Name, v.ConfigMap.Items, v.ConfigMap.Optional, mode(v.ConfigMap.DefaultMode))
	case v.Secret != nil:
		return dir, k.writeSecret(ctx, rt, dir, v.Secret.SecretName, v.Secret.Items, v.Secret.Optional, mode(v.Secret.DefaultMode))
	case v.DownwardAPI != nil:
		return dir, k.writeDownward(rt, dir, v.DownwardAPI.Items, mode(v.DownwardAPI.DefaultMode))
	case v.Projected != nil:
		m := mode(v.Projected.DefaultMode)
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return "", err
		}
		for _, src := range v.Projected.Sources {
			var err error
			switch {
			case src.ServiceAccountToken != nil:
				err = k.writeToken(ctx, rt, dir, *src.ServiceAccountToken, m)
			case src.ConfigMap != nil:
				err = k.writeConfigMap(ctx, rt, dir, src.ConfigMap.Name, src.ConfigMap.Items, src.ConfigMap.Optional, m)
			case src.Secret != nil:
				err = k.writeSecret(ctx, rt, dir, src.Secret.Name, src.Secret.Items, src.Secret.Optional, m)
			case src.DownwardAPI != nil:
				err = k.writeDownward(rt, dir, src.DownwardAPI.Items, m)
			}
			if err != nil {
				return "", err
			}
		}
		return dir, nil
	}
	// emptyDir, and every other kind (an empty folder stands in).
	if v.EmptyDir == nil {
		k.log.Warn("volume kind not supported: an empty folder stands in", "pod", rt.key, "volume", v.Name)
	}
	return dir, os.MkdirAll(dir, 0o755)
}

// mode returns a volume's file mode (0644 by default).
func mode(m *int32) fs.FileMode {
	if m == nil {
		return 0o644
	}
	return fs.FileMode(*m) & fs.ModePerm
}

// setupHostPath checks or creates a hostPath per its type and returns its
// host path.
func (k *kubelet) setupHostPath(h *corev1.HostPathVolumeSource) (string, error) {
	src := k.hostPathSource(h.Path)
	mapped := src != path.Clean("/"+h.Path)
	typ := corev1.HostPathUnset
	if h.Type != nil {
		typ = *h.Type
	}
	st, err := os.Stat(src)
	missing := errors.Is(err, os.ErrNotExist)
	switch typ {
	case corev1.HostPathDirectoryOrCreate:
		if missing {
			return src, os.MkdirAll(src, 0o755)
		}
	case corev1.HostPathUnset:
		if missing && mapped { // a container runtime creates a missing source folder
			return src, os.MkdirAll(src, 0o755)
		}
	case corev1.HostPathFileOrCreate:
		if missing {
			if err := os.MkdirAll(filepath.Dir(src), 0o755); err != nil {
				return "", err
			}
			f, err := os.OpenFile(src, os.O_CREATE|os.O_WRONLY, 0o644)
			if err != nil {
				return "", err
			}
			return src, f.Close()
		}
	}
	if err != nil {
		return "", fmt.Errorf("hostPath %s (%s): %w", h.Path, src, err)
	}
	want := map[corev1.HostPathType]func(fs.FileMode) bool{
		corev1.HostPathDirectory:         fs.FileMode.IsDir,
		corev1.HostPathFile:              fs.FileMode.IsRegular,
		corev1.HostPathSocket:            func(m fs.FileMode) bool { return m&fs.ModeSocket != 0 },
		corev1.HostPathCharDev:           func(m fs.FileMode) bool { return m&fs.ModeCharDevice != 0 },
		corev1.HostPathBlockDev:          func(m fs.FileMode) bool { return m&fs.ModeDevice != 0 && m&fs.ModeCharDevice == 0 },
		corev1.HostPathDirectoryOrCreate: fs.FileMode.IsDir,
		corev1.HostPathFileOrCreate:      fs.FileMode.IsRegular,
	}
	if ok := want[typ]; ok != nil && !ok(st.Mode()) {
		return "", fmt.Errorf("hostPath %s (%s) is not of type %s", h.Path, src, typ)
	}
	return src, nil
}

// writeFile writes data to dir/rel atomically (a rename), creating folders.
func writeFile(dir, rel string, data []byte, m fs.FileMode) error {
	rel = path.Clean("/" + rel)[1:]
	if rel == "" {
		return errors.New("empty item path")
	}
	p := filepath.Join(dir, rel)
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		return err
	}
	tmp := p + ".kfl-tmp"
	if err := os.WriteFile(tmp, data, m); err != nil {
		return err
	}
	if err := os.Chmod(tmp, m); err != nil {
		return err
	}
	return os.Rename(tmp, p)
}

// writeItems writes data's keys (or the listed items) into dir.
func writeItems(dir string, data map[string][]byte, items []corev1.KeyToPath, optional bool, m fs.FileMode, what string) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	if len(items) == 0 {
		for key, v := range data {
			if err := writeFile(dir, key, v, m); err != nil {
				return err
			}
		}
		return nil
	}
	for _, it := range items {
		v, ok := data[it.Key]
		if !ok {
			if optional {
				continue
			}
			return fmt.Errorf("%s has no key %q", what, it.Key)
		}
		im := m
		if it.Mode != nil {
			im = mode(it.Mode)
		}
		if err := writeFile(dir, it.Path, v, im); err != nil {
			return err
		}
	}
	return nil
}

// writeConfigMap writes a ConfigMap's data into dir.
func (k *kubelet) writeConfigMap(ctx context.Context, rt *podRuntime, dir, name string, items []corev1.KeyToPath, optional *bool, m fs.FileMode) error {
	cm, err := k.cfg.Client.CoreV1().ConfigMaps(rt.namespace).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		if apierrors.IsNotFound(err) && ptrTrue(optional) {
			return os.MkdirAll(dir, 0o755)
		}
		return fmt.Errorf("configmap %q: %w", name, err)
	}
	data := map[string][]byte{}
	for k, v := range cm.Data {
		data[k] = []byte(v)
	}
	for k, v := range cm.BinaryData {
		data[k] = v
	}
	return writeItems(dir, data, items, ptrTrue(optional), m, "configmap "+name)
}

// writeSecret writes a Secret's data into dir.
func (k *kubelet) writeSecret(ctx context.Context, rt *podRuntime, dir, name string, items []corev1.KeyToPath, optional *bool, m fs.FileMode) error {
	s, err := k.cfg.Client.CoreV1().Secrets(rt.namespace).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		if apierrors.IsNotFound(err) && ptrTrue(optional) {
			return os.MkdirAll(dir, 0o755)
		}
		return fmt.Errorf("secret %q: %w", name, err)
	}
	return writeItems(dir, s.Data, items, ptrTrue(optional), m, "secret "+name)
}

// writeDownward writes downward API items (fieldRef) into dir.
func (k *kubelet) writeDownward(rt *podRuntime, dir string, items []corev1.DownwardAPIVolumeFile, m fs.FileMode) error {
	in := envInput{pod: rt.pod, podIPs: rt.sandbox.IPs, hostIPs: rt.hostIPs, allocatable: nodeCapacity}
	for _, it := range items {
		var v string
		var err error
		switch {
		case it.FieldRef != nil:
			v, err = podFieldValue(in, it.FieldRef.FieldPath)
		case it.ResourceFieldRef != nil:
			c := &corev1.Container{Name: it.ResourceFieldRef.ContainerName}
			v, err = resourceFieldValue(in, c, it.ResourceFieldRef)
		}
		if err != nil {
			return err
		}
		im := m
		if it.Mode != nil {
			im = mode(it.Mode)
		}
		if err := writeFile(dir, it.Path, []byte(v), im); err != nil {
			return err
		}
	}
	return nil
}

// writeToken requests a token of the pod's service account bound to the
// pod (TokenRequest) and writes it into dir; renewTokens renews it.
func (k *kubelet) writeToken(ctx context.Context, rt *podRuntime, dir string, src corev1.ServiceAccountTokenProjection, m fs.FileMode) error {
	tf := tokenFile{path: filepath.Join(dir, path.Clean("/" + src.Path)[1:]), source: src}
	if err := k.renewToken(ctx, rt, &tf, m); err != nil {
		return err
	}
	rt.volumes.tokens = append(rt.volumes.tokens, tf)
	return nil
}

// renewToken requests and writes the token of tf.
func (k *kubelet) renewToken(ctx context.Context, rt *podRuntime, tf *tokenFile, m fs.FileMode) error {
	sa := rt.pod.Spec.ServiceAccountName
	if sa == "" {
		sa = "default"
	}
	secs := int64(defaultTokenSeconds)
	if tf.source.ExpirationSeconds != nil {
		secs = max(*tf.source.ExpirationSeconds, minTokenSeconds)
	}
	var audiences []string
	if tf.source.Audience != "" {
		audiences = []string{tf.source.Audience}
	}
	tr, err := k.cfg.Client.CoreV1().ServiceAccounts(rt.namespace).CreateToken(ctx, sa, &authenticationv1.TokenRequest{
		Spec: authenticationv1.TokenRequestSpec{
			Audiences:         audiences,
			ExpirationSeconds: &secs,
			BoundObjectRef:    &authenticationv1.BoundObjectReference{Kind: "Pod", APIVersion: "v1", Name: rt.name, UID: rt.uid},
		},
	}, metav1.CreateOptions{})
	if err != nil {
		return fmt.Errorf("token of service account %s/%s: %w", rt.namespace, sa, err)
	}
	now := k.now()
	exp := tr.Status.ExpirationTimestamp.Time
	if !exp.After(now) {
		exp = now.Add(time.Duration(secs) * time.Second)
	}
	tf.issuedAt = now
	tf.renewAt = renewTime(now, exp)
	return writeFile(filepath.Dir(tf.path), filepath.Base(tf.path), []byte(tr.Status.Token), m)
}

// renewTime is when a token issued at issued and expiring at expiry is
// renewed: after 80% of its life.
func renewTime(issued, expiry time.Time) time.Time {
	return issued.Add(time.Duration(float64(expiry.Sub(issued)) * tokenRefreshAt))
}

// renewTokens renews the pod's tokens when due until ctx ends (the pod is
// torn down); a failed renewal is retried after 10 s.
func (k *kubelet) renewTokens(ctx context.Context, rt *podRuntime, tokens []tokenFile) {
	for {
		next := time.Time{}
		for i := range tokens {
			if next.IsZero() || tokens[i].renewAt.Before(next) {
				next = tokens[i].renewAt
			}
		}
		if next.IsZero() {
			return
		}
		select {
		case <-ctx.Done():
			return
		case <-k.after(next.Sub(k.now())):
		}
		for i := range tokens {
			if !k.now().Before(tokens[i].renewAt) {
				if err := k.renewToken(ctx, rt, &tokens[i], 0o644); err != nil {
					k.log.Warn("token renewal failed", "pod", rt.key, "err", err)
					tokens[i].renewAt = k.now().Add(10 * time.Second)
				} else {
					k.log.Info("token renewed", "pod", rt.key, "file", tokens[i].path, "next", tokens[i].renewAt)
				}
			}
		}
	}
}

// containerBinds returns the bind mounts of container c: each volumeMount
// (subPath below its volume) from the pod's volumes.
func (rt *podRuntime) containerBinds(mounts []corev1.VolumeMount) ([]string, error) {
	var binds []string
	for _, m := range mounts {
		src, ok := rt.volumes.paths[m.Name]
		if !ok {
			return nil, fmt.Errorf("%w: volumeMount %q names no volume", ErrContainerConfig, m.Name)
		}
		if m.SubPath != "" {
			src = filepath.Join(src, path.Clean("/" + m.SubPath)[1:])
		}
		b := src + ":" + path.Clean(m.MountPath)
		if m.ReadOnly {
			b += ":ro"
		}
		if strings.Count(b, ":") > 2 {
			return nil, fmt.Errorf("%w: volumeMount %q: paths with ':' are not supported", ErrContainerConfig, m.Name)
		}
		binds = append(binds, b)
	}
	return binds, nil
}

// removeVolumes removes the pod's volume folder (hostPath data stays).
func (k *kubelet) removeVolumes(rt *podRuntime) {
	if rt.stopTokens != nil {
		rt.stopTokens()
	}
	if err := os.RemoveAll(k.podVolumeDir(rt)); err != nil {
		k.log.Warn("remove pod volumes", "pod", rt.key, "err", err)
	}
}
