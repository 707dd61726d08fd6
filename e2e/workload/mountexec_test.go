package workload

import (
	"errors"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestParseMountExec(t *testing.T) {
	tests := []struct {
		args      []string
		wantBinds []bindMount
		wantArgv  []string
		wantErr   bool
	}{
		{args: []string{"--", "sh", "-c", "true"}, wantArgv: []string{"sh", "-c", "true"}},
		{args: []string{"--bind", "/a:/b", "--bind", "/c:/d:ro", "--", "kg", "--x"},
			wantBinds: []bindMount{{Src: "/a", Dst: "/b"}, {Src: "/c", Dst: "/d", ReadOnly: true}}, wantArgv: []string{"kg", "--x"}},
		{args: []string{"--bind", "/a:/b"}, wantErr: true},         // no --
		{args: []string{"--bind", "/a:/b", "--"}, wantErr: true},   // no command
		{args: []string{"--bind", "/a", "--", "x"}, wantErr: true}, // no target
		{args: []string{"--bind", "/a:/b:rw", "--", "x"}, wantErr: true},
		{args: []string{"--bind", "a:/b", "--", "x"}, wantErr: true}, // relative
		{args: []string{"sh"}, wantErr: true},
	}
	for _, tt := range tests {
		binds, argv, err := parseMountExec(tt.args)
		if tt.wantErr {
			if !errors.Is(err, ErrUsage) {
				t.Errorf("parseMountExec(%q) err = %v, want ErrUsage", tt.args, err)
			}
			continue
		}
		if err != nil || !cmp.Equal(binds, tt.wantBinds) || !cmp.Equal(argv, tt.wantArgv) {
			t.Errorf("parseMountExec(%q) = %v, %q, %v", tt.args, binds, argv, err)
		}
	}
}
