package wireguard

import (
	"errors"
	"testing"
)

func TestParseMode(t *testing.T) {
	tests := []struct {
		name, in string
		want     Mode
		wantErr  bool
	}{
		{name: "empty is auto", in: "", want: ModeAuto},
		{name: "auto", in: "auto", want: ModeAuto},
		{name: "kernel", in: "kernel", want: ModeKernel},
		{name: "userspace", in: "userspace", want: ModeUserspace},
		{name: "unknown", in: "user", wantErr: true},
		{name: "case matters", in: "Kernel", wantErr: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := ParseMode(tt.in)
			if tt.wantErr {
				if !errors.Is(err, ErrInvalidMode) {
					t.Errorf("ParseMode(%q) error = %v, want ErrInvalidMode", tt.in, err)
				}
				return
			}
			if err != nil || got != tt.want {
				t.Errorf("ParseMode(%q) = %q, %v; want %q", tt.in, got, err, tt.want)
			}
			var m Mode
			if err := m.Set(tt.in); err != nil || m != tt.want {
				t.Errorf("Set(%q) = %v, mode %q", tt.in, err, m)
			}
		})
	}
}
