package lab

import (
	"fmt"
	"net/netip"
	"strings"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
)

// The cluster DNS objects the lab creates when Spec.CoreDNS is set, named
// as kubeadm names them.
const (
	// KubeDNSService is the Service in kube-system whose ClusterIP
	// (ClusterSpec.ClusterDNS, .10 of the service CIDR) pods use as their
	// nameserver.
	KubeDNSService = "kube-dns"
	// CoreDNSUser is the identity (client certificate) CoreDNS reads the
	// API with, bound to the ClusterRole of the same name.
	CoreDNSUser = "system:coredns"
	// CoreDNSReadyPort is the port of CoreDNS's ready plugin (GET /ready)
	// on the DNS node's management address.
	CoreDNSReadyPort = 8181
	// coreDNSManagedBy marks the kube-dns EndpointSlice as the lab's, so
	// that no controller of kube-controller-manager takes it over.
	coreDNSManagedBy = "lab.kilofed.io"
)

// corednsConfig is what a cluster's Corefile depends on.
type corednsConfig struct {
	cluster    string         // cluster name, for the header
	domain     string         // cluster domain (cluster.local)
	bind       netip.Addr     // the address it serves DNS on (the node's LAN address)
	ready      netip.AddrPort // the ready plugin's address
	kubeconfig string         // the kubeconfig of CoreDNSUser
	clusterSet netip.AddrPort // where clusterset.local goes; invalid: no stanza
}

// corefile renders a cluster's Corefile: the cluster domain and the reverse
// zones from the API (the kubernetes plugin, as kubeadm configures it), no
// forward of other names (nothing outside the lab is asked: they get
// SERVFAIL), the reload plugin watching the file, and, when clusterSet is
// valid, a clusterset.local stanza forwarding to it, the wiring users add
// for kilofed's DNS server.
func corefile(c corednsConfig) string {
	var b strings.Builder
	fmt.Fprintf(&b, "# Corefile of cluster %s, written by the kilofed lab.\n", c.cluster)
	fmt.Fprintf(&b, `.:53 {
    bind %s
    errors
    ready %s
    kubernetes %s in-addr.arpa ip6.arpa {
        kubeconfig %s
        pods insecure
        fallthrough in-addr.arpa ip6.arpa
        ttl 5
    }
    cache 30 {
        disable success %[3]s
        disable denial %[3]s
    }
    reload 2s 1s
    loadbalance
}
`, c.bind, c.ready, c.domain, c.kubeconfig)
	if c.clusterSet.IsValid() {
		fmt.Fprintf(&b, `clusterset.local:53 {
    bind %s
    errors
    forward . %s
}
`, c.bind, c.clusterSet)
	}
	return b.String()
}

// kubeDNSService returns the kube-dns Service: a fixed ClusterIP, DNS over
// UDP and TCP, no selector (the lab writes its EndpointSlice).
func kubeDNSService(ip netip.Addr) *corev1.Service {
	return &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Namespace: metav1.NamespaceSystem, Name: KubeDNSService, Labels: map[string]string{
			"k8s-app": "kube-dns", "kubernetes.io/name": "CoreDNS", "kubernetes.io/cluster-service": "true",
		}},
		Spec: corev1.ServiceSpec{
			ClusterIP: ip.String(),
			Ports: []corev1.ServicePort{
				{Name: "dns", Port: 53, Protocol: corev1.ProtocolUDP},
				{Name: "dns-tcp", Port: 53, Protocol: corev1.ProtocolTCP},
			},
		},
	}
}

// kubeDNSEndpointSlice returns the EndpointSlice of kube-dns: CoreDNS on
// node at addr, ready.
func kubeDNSEndpointSlice(node string, addr netip.Addr) *discoveryv1.EndpointSlice {
	family := discoveryv1.AddressTypeIPv4
	if addr.Is6() {
		family = discoveryv1.AddressTypeIPv6
	}
	return &discoveryv1.EndpointSlice{
		ObjectMeta: metav1.ObjectMeta{Namespace: metav1.NamespaceSystem, Name: KubeDNSService + "-coredns", Labels: map[string]string{
			discoveryv1.LabelServiceName: KubeDNSService,
			discoveryv1.LabelManagedBy:   coreDNSManagedBy,
		}},
		AddressType: family,
		Endpoints: []discoveryv1.Endpoint{{
			Addresses:  []string{addr.String()},
			Conditions: discoveryv1.EndpointConditions{Ready: ptr.To(true), Serving: ptr.To(true), Terminating: ptr.To(false)},
			NodeName:   ptr.To(node),
		}},
		Ports: []discoveryv1.EndpointPort{
			{Name: ptr.To("dns"), Port: ptr.To[int32](53), Protocol: ptr.To(corev1.ProtocolUDP)},
			{Name: ptr.To("dns-tcp"), Port: ptr.To[int32](53), Protocol: ptr.To(corev1.ProtocolTCP)},
		},
	}
}

// coreDNSRBAC returns the ClusterRole and ClusterRoleBinding that let
// CoreDNSUser read what the kubernetes plugin watches (the rules of
// CoreDNS's own manifests).
func coreDNSRBAC() (*rbacv1.ClusterRole, *rbacv1.ClusterRoleBinding) {
	role := &rbacv1.ClusterRole{
		ObjectMeta: metav1.ObjectMeta{Name: CoreDNSUser},
		Rules: []rbacv1.PolicyRule{
			{APIGroups: []string{""}, Resources: []string{"endpoints", "services", "pods", "namespaces"}, Verbs: []string{"list", "watch"}},
			{APIGroups: []string{"discovery.k8s.io"}, Resources: []string{"endpointslices"}, Verbs: []string{"list", "watch"}},
		},
	}
	binding := &rbacv1.ClusterRoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: CoreDNSUser},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: CoreDNSUser},
		Subjects:   []rbacv1.Subject{{APIGroup: rbacv1.GroupName, Kind: rbacv1.UserKind, Name: CoreDNSUser}},
	}
	return role, binding
}
