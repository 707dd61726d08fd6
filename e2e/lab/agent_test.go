package lab

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestAgentScript(t *testing.T) {
	l := laidOut(t, twoClusterSpec(), 0)
	l.Dir = "/tmp/kfl-gold-1"
	n := l.Cluster("c1").Node("node-beijing")
	prefix := "mkdir -p /run/wireguard && mount -t tmpfs kfl-wg /run/wireguard && exec "
	common := "'--kubeconfig=/tmp/kfl-gold-1/c1/kg-node-beijing.kubeconfig' '--hostname=node-beijing' '--subnet=10.5.0.0/16' "
	tail := " '--wireguard=userspace' '--key-file=/tmp/kfl-gold-1/keys/c1-node-beijing/key'"
	tests := []struct {
		name    string
		opts    AgentOptions
		want    string
		wantErr string
	}{
		{
			name: "defaults: location granularity, no encapsulation",
			opts: AgentOptions{Binary: "/bin/kg"},
			want: prefix + "'/bin/kg' " + common + "'--mesh-granularity=location' '--encapsulate=never'" + tail,
		},
		{
			name: "options and quoted extra flags",
			opts: AgentOptions{Binary: "/opt/my kg", Granularity: "full", Encapsulate: "always", Extra: []string{"--log-level=debug", "--x=it's"}},
			want: prefix + "'/opt/my kg' " + common + "'--mesh-granularity=full' '--encapsulate=always'" + tail +
				` '--log-level=debug' '--x=it'\''s'`,
		},
		{name: "no binary", opts: AgentOptions{}, wantErr: "Binary is empty"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := n.agentScript(tt.opts, "/tmp/kfl-gold-1/c1/kg-node-beijing.kubeconfig")
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("agentScript = %q, %v; want an error containing %q", got, err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("agentScript (-want +got):\n%s", diff)
			}
		})
	}
}
