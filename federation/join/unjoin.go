package join

import (
	"context"
	"fmt"
	"io"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	fedv1 "github.com/kilofed/kilofed/federation/apis/federation/v1alpha1"
	"github.com/kilofed/kilofed/federation/discover"
	"github.com/kilofed/kilofed/federation/kube"
	"github.com/kilofed/kilofed/federation/mirror"
	kilov1 "github.com/kilofed/kilofed/mesh/apis/kilo/v1alpha1"
)

// Unjoin removes, in both clusters, everything that links them: the
// RemoteClusters, the mirrored Peers, the Secrets, ServiceAccounts, Roles
// and RoleBindings. Links to other clusters and Peers written by users stay.
// A cluster that cannot be reached is reported; what can be removed is.
func Unjoin(ctx context.Context, local, remote *kube.Cluster, out io.Writer) error {
	p := progress{w: out}
	ids := [2]string{}
	for i, c := range []*kube.Cluster{local, remote} {
		id, err := discover.ClusterID(ctx, c.Client)
		if err != nil {
			if i == 1 {
				return fmt.Errorf("read the ID of %s: %w; nothing removed. If %s is lost, remove this cluster's side of the link alone: kilofed unjoin <its cluster ID> --local-only (this cluster links to %v)", c.Name, err, c.Name, remoteIDs(ctx, local))
			}
			return fmt.Errorf("read the ID of %s: %w", c.Name, err)
		}
		ids[i] = id
	}
	var errs []error
	for i, c := range []*kube.Cluster{local, remote} {
		other := ids[1-i]
		p.step("removing %s's link to %s", ids[i], other)
		if err := removeLink(ctx, c, other, &p); err != nil {
			errs = append(errs, err)
		}
	}
	if len(errs) > 0 {
		return fmt.Errorf("unjoin %s and %s: %v", ids[0], ids[1], errs)
	}
	p.verdict("unjoined %s and %s", ids[0], ids[1])
	return nil
}

// UnjoinLocal removes only this cluster's side of its link to the cluster
// whose ID is other: the RemoteCluster, the mirrored Peers, the token this
// cluster held for other and the ServiceAccount other's token belongs to,
// so that token stops working here at once. It reads nothing from other:
// it is the form for a cluster that is lost or unreachable. Other's side
// stays until it is removed there (UnjoinLocal or Unjoin once it is back).
func UnjoinLocal(ctx context.Context, local *kube.Cluster, other string, out io.Writer) error {
	p := progress{w: out}
	linked, err := hasLink(ctx, local, other)
	if err != nil {
		return err
	}
	if !linked {
		return fmt.Errorf("%s has no link to a cluster %q (no RemoteCluster, mirrored Peer or credentials of that name); it links to %v: give the other cluster's ID as kubectl get remoteclusters shows it", local.Name, other, remoteIDs(ctx, local))
	}
	p.step("removing %s's side of its link to %s (%s is not read)", local.Name, other, other)
	if err := removeLink(ctx, local, other, &p); err != nil {
		return fmt.Errorf("unjoin %s from %s: %w", local.Name, other, err)
	}
	p.verdict("%s no longer links to %s, and %s's token no longer works here. %s keeps its side of the link: once it is back, run `kilofed unjoin %s --local-only` there, or `kilofed join` to link them again", local.Name, other, other, other, localIDOr(ctx, local))
	return nil
}

// hasLink reports whether c holds any object linking it to other.
func hasLink(ctx context.Context, c *kube.Cluster, other string) (bool, error) {
	name := AccountName(other)
	for _, obj := range []client.Object{&fedv1.RemoteCluster{}, &corev1.Secret{}, &corev1.ServiceAccount{}} {
		key := client.ObjectKey{Name: other}
		if _, ok := obj.(*fedv1.RemoteCluster); !ok {
			key = client.ObjectKey{Namespace: fedv1.Namespace, Name: name}
		}
		err := c.Client.Get(ctx, key, obj)
		switch {
		case err == nil:
			return true, nil
		case client.IgnoreNotFound(err) != nil:
			return false, fmt.Errorf("read %T %s in %s: %w", obj, key.Name, c.Name, err)
		}
	}
	var peers kilov1.PeerList
	if err := c.Client.List(ctx, &peers, client.MatchingLabels{mirror.LabelRemote: other, mirror.LabelManagedBy: mirror.ManagedBy}); err != nil {
		return false, fmt.Errorf("list the Peers mirrored from %s in %s: %w", other, c.Name, err)
	}
	return len(peers.Items) > 0, nil
}

// remoteIDs returns the names of c's RemoteClusters (the IDs of the
// clusters it links to), or why they cannot be listed.
func remoteIDs(ctx context.Context, c *kube.Cluster) any {
	var rcs fedv1.RemoteClusterList
	if err := c.Client.List(ctx, &rcs); err != nil {
		return fmt.Sprintf("(RemoteClusters not listed: %v)", err)
	}
	names := make([]string, 0, len(rcs.Items))
	for _, rc := range rcs.Items {
		names = append(names, rc.Name)
	}
	return names
}

// localIDOr returns c's cluster ID, or its name when it cannot be read.
func localIDOr(ctx context.Context, c *kube.Cluster) string {
	if id, err := discover.ClusterID(ctx, c.Client); err == nil {
		return id
	}
	return c.Name
}

// removeLink deletes in c what links it to other, both ways.
func removeLink(ctx context.Context, c *kube.Cluster, other string, p *progress) error {
	name := AccountName(other)
	meta := metav1.ObjectMeta{Name: name, Namespace: fedv1.Namespace}
	objs := []client.Object{
		&fedv1.RemoteCluster{ObjectMeta: metav1.ObjectMeta{Name: other}},
		&corev1.Secret{ObjectMeta: meta},
		&rbacv1.RoleBinding{ObjectMeta: meta},
		&rbacv1.Role{ObjectMeta: meta},
		&corev1.ServiceAccount{ObjectMeta: meta},
	}
	for _, obj := range objs {
		if err := client.IgnoreNotFound(c.Client.Delete(ctx, obj)); err != nil {
			return fmt.Errorf("delete %T %s in %s: %w", obj, obj.GetName(), c.Name, err)
		}
	}
	// The Peers go with their RemoteCluster (owner reference); delete them
	// now as well, so that nothing routes to the other cluster meanwhile.
	// Only Peers labelled for other are selected: user Peers carry no label.
	var peers kilov1.PeerList
	if err := c.Client.List(ctx, &peers, client.MatchingLabels{mirror.LabelRemote: other, mirror.LabelManagedBy: mirror.ManagedBy}); err != nil {
		return fmt.Errorf("list the Peers mirrored from %s in %s: %w", other, c.Name, err)
	}
	for i := range peers.Items {
		if err := client.IgnoreNotFound(c.Client.Delete(ctx, &peers.Items[i])); err != nil {
			return fmt.Errorf("delete Peer %s in %s: %w", peers.Items[i].Name, c.Name, err)
		}
	}
	p.detail("%s: removed the RemoteCluster, %d Peers and the credentials of %s", c.Name, len(peers.Items), other)
	return nil
}
