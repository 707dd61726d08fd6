package lab

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"math/big"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"time"

	"k8s.io/client-go/util/keyutil"
)

// certValidity is how long lab certificates live: far longer than a lab.
const certValidity = 7 * 24 * time.Hour

// clusterPKI is one cluster's certificate authority and the key material
// its control plane uses, all as files under dir.
type clusterPKI struct {
	dir    string
	ca     *x509.Certificate
	caKey  crypto.Signer
	caPEM  []byte
	caCert string // path
	caKeyF string // path

	saKey, saPub           string // service-account signing key pair (paths)
	serverCert, serverKy   string // API server serving pair
	kubeletCert, kubeletKy string // API server -> kubelet client pair
}

// serverIdentity is what the API server's serving certificate must cover.
type serverIdentity struct {
	IPs    []netip.Addr
	Domain string // cluster domain, for kubernetes.default.svc.<domain>
}

// newClusterPKI creates a CA, a service-account key pair, the API server's
// serving certificate and its kubelet client certificate in dir.
func newClusterPKI(dir, clusterName string, id serverIdentity) (*clusterPKI, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("pki: %w", err)
	}
	p := &clusterPKI{dir: dir}
	caKey, err := newKey()
	if err != nil {
		return nil, err
	}
	now := time.Now().Add(-time.Hour)
	tmpl := &x509.Certificate{
		SerialNumber:          serial(),
		Subject:               pkix.Name{CommonName: "kilofed-lab-ca-" + clusterName},
		NotBefore:             now,
		NotAfter:              now.Add(certValidity),
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature | x509.KeyUsageKeyEncipherment,
		BasicConstraintsValid: true,
		IsCA:                  true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, caKey.Public(), caKey)
	if err != nil {
		return nil, fmt.Errorf("pki: create CA: %w", err)
	}
	if p.ca, err = x509.ParseCertificate(der); err != nil {
		return nil, fmt.Errorf("pki: parse CA: %w", err)
	}
	p.caKey = caKey
	p.caPEM = pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})
	p.caCert = filepath.Join(dir, "ca.crt")
	p.caKeyF = filepath.Join(dir, "ca.key")
	if err := writePair(p.caCert, p.caKeyF, p.caPEM, caKey); err != nil {
		return nil, err
	}

	saKey, err := newKey()
	if err != nil {
		return nil, err
	}
	p.saKey = filepath.Join(dir, "sa.key")
	p.saPub = filepath.Join(dir, "sa.pub")
	pubDER, err := x509.MarshalPKIXPublicKey(saKey.Public())
	if err != nil {
		return nil, fmt.Errorf("pki: service-account key: %w", err)
	}
	if err := writePair(p.saPub, p.saKey, pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: pubDER}), saKey); err != nil {
		return nil, err
	}

	dns := []string{"kubernetes", "kubernetes.default", "kubernetes.default.svc", "kubernetes.default.svc." + id.Domain, "localhost"}
	var ips []net.IP
	for _, a := range id.IPs {
		ips = append(ips, net.IP(a.AsSlice()))
	}
	certPEM, key, err := p.issue(pkix.Name{CommonName: "kube-apiserver"}, x509.ExtKeyUsageServerAuth, dns, ips)
	if err != nil {
		return nil, err
	}
	p.serverCert, p.serverKy = filepath.Join(dir, "apiserver.crt"), filepath.Join(dir, "apiserver.key")
	if err := writePair(p.serverCert, p.serverKy, certPEM, key); err != nil {
		return nil, err
	}
	certPEM, key, err = p.issue(pkix.Name{CommonName: "kube-apiserver-kubelet-client", Organization: []string{"system:masters"}},
		x509.ExtKeyUsageClientAuth, nil, nil)
	if err != nil {
		return nil, err
	}
	p.kubeletCert, p.kubeletKy = filepath.Join(dir, "apiserver-kubelet-client.crt"), filepath.Join(dir, "apiserver-kubelet-client.key")
	if err := writePair(p.kubeletCert, p.kubeletKy, certPEM, key); err != nil {
		return nil, err
	}
	return p, nil
}

// clientCert is a client certificate and its key, PEM encoded.
type clientCert struct {
	certPEM, keyPEM []byte
}

// issueClient issues a client certificate for user in groups.
func (p *clusterPKI) issueClient(user string, groups ...string) (clientCert, error) {
	certPEM, key, err := p.issue(pkix.Name{CommonName: user, Organization: groups}, x509.ExtKeyUsageClientAuth, nil, nil)
	if err != nil {
		return clientCert{}, err
	}
	keyPEM, err := keyutil.MarshalPrivateKeyToPEM(key)
	if err != nil {
		return clientCert{}, fmt.Errorf("pki: encode key of %s: %w", user, err)
	}
	return clientCert{certPEM: certPEM, keyPEM: keyPEM}, nil
}

// issueKubeletServing issues the serving certificate of a node's kubelet
// API, as kubelets have: system:node:<node> in system:nodes, for the IPs
// the API server dials.
func (p *clusterPKI) issueKubeletServing(node string, ips []netip.Addr) (tls.Certificate, error) {
	var netIPs []net.IP
	for _, a := range ips {
		netIPs = append(netIPs, net.IP(a.AsSlice()))
	}
	certPEM, key, err := p.issue(pkix.Name{CommonName: "system:node:" + node, Organization: []string{"system:nodes"}},
		x509.ExtKeyUsageServerAuth, []string{node}, netIPs)
	if err != nil {
		return tls.Certificate{}, err
	}
	keyPEM, err := keyutil.MarshalPrivateKeyToPEM(key)
	if err != nil {
		return tls.Certificate{}, fmt.Errorf("pki: encode key of %s: %w", node, err)
	}
	pair, err := tls.X509KeyPair(certPEM, keyPEM)
	if err != nil {
		return tls.Certificate{}, fmt.Errorf("pki: serving pair of %s: %w", node, err)
	}
	return pair, nil
}

// caPool returns a pool holding the cluster CA (to verify the clients it
// signed, such as the API server's kubelet client).
func (p *clusterPKI) caPool() *x509.CertPool {
	pool := x509.NewCertPool()
	pool.AddCert(p.ca)
	return pool
}

// issue signs a new key's certificate with the CA.
func (p *clusterPKI) issue(subject pkix.Name, usage x509.ExtKeyUsage, dns []string, ips []net.IP) ([]byte, crypto.Signer, error) {
	key, err := newKey()
	if err != nil {
		return nil, nil, err
	}
	now := time.Now().Add(-time.Hour)
	tmpl := &x509.Certificate{
		SerialNumber: serial(),
		Subject:      subject,
		NotBefore:    now,
		NotAfter:     now.Add(certValidity),
		KeyUsage:     x509.KeyUsageDigitalSignature | x509.KeyUsageKeyEncipherment,
		ExtKeyUsage:  []x509.ExtKeyUsage{usage},
		DNSNames:     dns,
		IPAddresses:  ips,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, p.ca, key.Public(), p.caKey)
	if err != nil {
		return nil, nil, fmt.Errorf("pki: issue %s: %w", subject.CommonName, err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), key, nil
}

func newKey() (crypto.Signer, error) {
	k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, fmt.Errorf("pki: generate key: %w", err)
	}
	return k, nil
}

func serial() *big.Int {
	n, _ := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 120))
	return n
}

// writePair writes a PEM certificate (or public key) and a private key.
func writePair(certPath, keyPath string, certPEM []byte, key crypto.Signer) error {
	keyPEM, err := keyutil.MarshalPrivateKeyToPEM(key)
	if err != nil {
		return fmt.Errorf("pki: encode %s: %w", keyPath, err)
	}
	if err := os.WriteFile(certPath, certPEM, 0o644); err != nil {
		return fmt.Errorf("pki: %w", err)
	}
	if err := os.WriteFile(keyPath, keyPEM, 0o600); err != nil {
		return fmt.Errorf("pki: %w", err)
	}
	return nil
}
