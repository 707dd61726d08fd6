package kgctl

import (
	"bufio"
	"fmt"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"sigs.k8s.io/yaml"

	"github.com/kilofed/kilofed/mesh/apis/kilo/v1alpha1"
	"github.com/kilofed/kilofed/mesh/k8s"
	"github.com/kilofed/kilofed/mesh/topology/wgconf"
)

// parseINI reads a wg-quick file back into an Interface, the way wg-quick
// and wg(8) read it: comments ignored, keys case-insensitive. Peer names
// (comments) are lost.
func parseINI(s string) (wgconf.Interface, error) {
	var iface wgconf.Interface
	var peer *wgconf.Peer
	section := ""
	sc := bufio.NewScanner(strings.NewReader(s))
	for n := 1; sc.Scan(); n++ {
		line, _, _ := strings.Cut(sc.Text(), "#")
		line = strings.TrimSpace(line)
		switch {
		case line == "":
			continue
		case line == "[Interface]" || line == "[Peer]":
			section = line
			if line == "[Peer]" {
				iface.Peers = append(iface.Peers, wgconf.Peer{})
				peer = &iface.Peers[len(iface.Peers)-1]
			}
			continue
		}
		k, v, ok := strings.Cut(line, "=")
		if !ok {
			return iface, fmt.Errorf("line %d: %q is not key = value", n, line)
		}
		k, v = strings.ToLower(strings.TrimSpace(k)), strings.TrimSpace(v)
		var err error
		switch section + k {
		case "[Interface]privatekey":
			iface.PrivateKey, err = wgconf.ParseSecretKey(v)
		case "[Interface]address":
			iface.Address, err = parseList(v)
		case "[Interface]listenport":
			iface.ListenPort, err = strconv.Atoi(v)
		case "[Peer]publickey":
			peer.PublicKey, err = wgconf.ParseKey(v)
		case "[Peer]presharedkey":
			var psk wgconf.SecretKey
			psk, err = wgconf.ParseSecretKey(v)
			peer.PresharedKey = &psk
		case "[Peer]allowedips":
			peer.AllowedIPs, err = parseList(v)
		case "[Peer]endpoint":
			peer.Endpoint, err = netip.ParseAddrPort(v)
		case "[Peer]persistentkeepalive":
			var secs int
			secs, err = strconv.Atoi(v)
			peer.PersistentKeepalive = time.Duration(secs) * time.Second
		default:
			err = fmt.Errorf("unknown key %q in %s", k, section)
		}
		if err != nil {
			return iface, fmt.Errorf("line %d: %w", n, err)
		}
	}
	return iface, sc.Err()
}

func parseList(v string) ([]netip.Prefix, error) {
	var out []netip.Prefix
	for _, f := range strings.Split(v, ",") {
		p, err := netip.ParsePrefix(strings.TrimSpace(f))
		if err != nil {
			return nil, err
		}
		out = append(out, p)
	}
	return out, nil
}

// TestPeerConfParsesBack checks that showconf peer --private-key-file gives
// a file that reads back as topology.PeerConf with the same private key,
// and that wg-quick accepts it.
func TestPeerConfParsesBack(t *testing.T) {
	dir := t.TempDir()
	keyFile := filepath.Join(dir, "dev-private.key")
	key := privateKey("seb-laptop")
	if err := os.WriteFile(keyFile, []byte(key.Base64()+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	stdout, stderr, code := run(t, NewFakeSource(seedSnapshot()), "showconf", "peer", "seb-laptop", "--private-key-file", keyFile)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	got, err := parseINI(stdout)
	if err != nil {
		t.Fatalf("parse the output: %v\n%s", err, stdout)
	}
	if got.PrivateKey != key || got.PrivateKey.PublicKey() != publicKey("seb-laptop") {
		t.Errorf("PrivateKey = %s, want %s", got.PrivateKey, key)
	}
	mesh, err := Compute(seedSnapshot(), MeshFlags{})
	if err != nil {
		t.Fatal(err)
	}
	want, err := mesh.Topology.PeerConf("seb-laptop")
	if err != nil {
		t.Fatal(err)
	}
	want.PrivateKey = key
	for i := range want.Peers {
		want.Peers[i].Name = "" // a comment in the file
	}
	if diff := cmp.Diff(want, got, cmp.Comparer(func(a, b netip.Prefix) bool { return a == b }),
		cmp.Comparer(func(a, b netip.AddrPort) bool { return a == b })); diff != "" {
		t.Errorf("parsed output differs from PeerConf (-want +got):\n%s", diff)
	}

	if _, err := exec.LookPath("wg-quick"); err != nil {
		t.Logf("wg-quick not installed: syntax not checked by wg-quick")
		return
	}
	conf := filepath.Join(dir, "wg-cluster.conf")
	if err := os.WriteFile(conf, []byte(stdout), 0o600); err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command("wg-quick", "strip", conf).CombinedOutput()
	if err != nil {
		t.Fatalf("wg-quick strip: %v: %s", err, out)
	}
	if !strings.Contains(string(out), "PrivateKey = "+key.Base64()) {
		t.Errorf("wg-quick strip lost the private key:\n%s", out)
	}
}

// TestPeerObjectRoundTrip checks that the Peer objects showconf prints
// are valid and read back as the mesh's Peers.
func TestPeerObjectRoundTrip(t *testing.T) {
	mesh, err := Compute(seedSnapshot(), MeshFlags{})
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range mesh.Topology.Peers {
		t.Run(want.Name, func(t *testing.T) {
			stdout, stderr, code := run(t, NewFakeSource(seedSnapshot()), "showconf", "peer", want.Name, "-o", "yaml")
			if code != 0 {
				t.Fatalf("exit %d: %s", code, stderr)
			}
			var p v1alpha1.Peer
			if err := yaml.UnmarshalStrict([]byte(stdout), &p); err != nil {
				t.Fatalf("decode:\n%s\n%v", stdout, err)
			}
			if p.APIVersion != "kilo.squat.ai/v1alpha1" || p.Kind != "Peer" {
				t.Errorf("apiVersion %q kind %q", p.APIVersion, p.Kind)
			}
			got, err := k8s.PeerFromObject(&p)
			if err != nil {
				t.Fatal(err)
			}
			got.Created, want.Created = time.Time{}, time.Time{}
			if diff := cmp.Diff(want, got, cmp.Comparer(func(a, b netip.Prefix) bool { return a == b }),
				cmp.Comparer(func(a, b netip.AddrPort) bool { return a == b })); diff != "" {
				t.Errorf("read back differs (-want +got):\n%s", diff)
			}
		})
	}
}

// TestPeerObjectKeepsPresharedKey checks that the preshared key, which
// prints redacted everywhere else, is written into the Peer object.
func TestPeerObjectKeepsPresharedKey(t *testing.T) {
	psk := privateKey("psk")
	p := PeerObject("laptop", wgconf.Peer{PublicKey: publicKey("laptop"), PresharedKey: &psk})
	if p.Spec.PresharedKey != psk.Base64() {
		t.Errorf("Spec.PresharedKey = %q, want the key in base64", p.Spec.PresharedKey)
	}
}
