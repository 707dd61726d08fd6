package join

import (
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	fedv1 "github.com/kilofed/kilofed/federation/apis/federation/v1alpha1"
	"github.com/kilofed/kilofed/federation/mirror"
	ssv1 "github.com/kilofed/kilofed/servicesync/apis/v1alpha1"
)

// AccountName is the name of the ServiceAccount (and of its Role and
// RoleBinding) that a cluster creates for the remote cluster reader, and of
// the Secret that holds its token in the reader.
func AccountName(reader string) string { return "kilofed-remote-" + reader }

// labels mark every object join writes for the remote cluster other.
func labels(other string) map[string]string {
	return map[string]string{mirror.LabelRemote: other, mirror.LabelManagedBy: "kilofed-join"}
}

// ReaderRules are everything a remote cluster's token may do in the
// publishing cluster: read its Announcement and its ExportedServices (what
// servicesync publishes of the ServiceExports), and ask for a fresh token
// for its own ServiceAccount before the current one expires.
func ReaderRules(account string) []rbacv1.PolicyRule {
	return []rbacv1.PolicyRule{
		{APIGroups: []string{fedv1.GroupName}, Resources: []string{"announcements"}, Verbs: []string{"get", "list", "watch"}},
		{APIGroups: []string{ssv1.GroupName}, Resources: []string{ssv1.Resource}, Verbs: []string{"get", "list", "watch"}},
		{APIGroups: []string{""}, Resources: []string{"serviceaccounts/token"}, ResourceNames: []string{account}, Verbs: []string{"create"}},
	}
}

// publisherObjects are the objects the publishing cluster holds for reader:
// the namespace, the ServiceAccount, its Role and RoleBinding.
func publisherObjects(reader string) []client.Object {
	name := AccountName(reader)
	meta := metav1.ObjectMeta{Name: name, Namespace: fedv1.Namespace, Labels: labels(reader)}
	return []client.Object{
		&corev1.Namespace{TypeMeta: typeMeta("v1", "Namespace"), ObjectMeta: metav1.ObjectMeta{Name: fedv1.Namespace}},
		&corev1.ServiceAccount{TypeMeta: typeMeta("v1", "ServiceAccount"), ObjectMeta: meta},
		&rbacv1.Role{TypeMeta: typeMeta("rbac.authorization.k8s.io/v1", "Role"), ObjectMeta: meta, Rules: ReaderRules(name)},
		&rbacv1.RoleBinding{
			TypeMeta: typeMeta("rbac.authorization.k8s.io/v1", "RoleBinding"), ObjectMeta: meta,
			RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: name},
			Subjects: []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Name: name, Namespace: fedv1.Namespace}},
		},
	}
}

// readerObjects are the objects the reading cluster holds for remote: the
// Secret with the token and the RemoteCluster.
func readerObjects(remote string, spec fedv1.RemoteClusterSpec, token string) []client.Object {
	return []client.Object{
		&corev1.Namespace{TypeMeta: typeMeta("v1", "Namespace"), ObjectMeta: metav1.ObjectMeta{Name: fedv1.Namespace}},
		&corev1.Secret{
			TypeMeta:   typeMeta("v1", "Secret"),
			ObjectMeta: metav1.ObjectMeta{Name: spec.CredentialsSecret, Namespace: fedv1.Namespace, Labels: labels(remote)},
			Type:       corev1.SecretTypeOpaque,
			Data:       map[string][]byte{"token": []byte(token)},
		},
		&fedv1.RemoteCluster{
			TypeMeta:   typeMeta(fedv1.SchemeGroupVersion.String(), "RemoteCluster"),
			ObjectMeta: metav1.ObjectMeta{Name: remote, Labels: labels(remote)},
			Spec:       spec,
		},
	}
}

func typeMeta(apiVersion, kind string) metav1.TypeMeta {
	return metav1.TypeMeta{APIVersion: apiVersion, Kind: kind}
}
