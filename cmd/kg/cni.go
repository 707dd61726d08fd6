package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"net/netip"
	"os"
	"path/filepath"
	"reflect"
)

// errNoIPAM says that a CNI configuration list has no plugin with an ipam
// section, so there is nowhere to write the pod CIDR.
var errNoIPAM = errors.New("no plugin of the CNI configuration list has an ipam section")

// setCNIPodCIDRs returns the CNI configuration list conf with the ranges of
// every plugin's ipam section set to cidrs (one host-local range set per
// CIDR, so a dual-stack node gets both families), and whether that changed
// anything. Other fields are kept.
func setCNIPodCIDRs(conf []byte, cidrs []netip.Prefix) ([]byte, bool, error) {
	var raw map[string]any
	if err := json.Unmarshal(conf, &raw); err != nil {
		return nil, false, fmt.Errorf("parse CNI configuration list: %w", err)
	}
	plugins, ok := raw["plugins"].([]any)
	if !ok {
		return nil, false, errors.New("CNI configuration list has no plugins array")
	}
	want := make([]any, 0, len(cidrs))
	for _, c := range cidrs {
		want = append(want, []any{map[string]any{"subnet": c.Masked().String()}})
	}
	found, changed := false, false
	for _, p := range plugins {
		m, ok := p.(map[string]any)
		if !ok {
			continue
		}
		ipam, ok := m["ipam"].(map[string]any)
		if !ok {
			continue
		}
		found = true
		if !reflect.DeepEqual(ipam["ranges"], want) {
			ipam["ranges"] = want
			changed = true
		}
	}
	if !found {
		return nil, false, errNoIPAM
	}
	if !changed {
		return conf, false, nil
	}
	out, err := json.MarshalIndent(raw, "", "  ")
	if err != nil {
		return nil, false, err
	}
	return append(out, '\n'), true, nil
}

// updateCNIConfig writes the node's pod CIDRs into the CNI configuration at
// path (Kilo's --cni), replacing the file atomically. A missing file means
// another CNI is in charge and is left alone.
func updateCNIConfig(path string, cidrs []netip.Prefix, log *slog.Logger) error {
	conf, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		log.Info("no CNI configuration to manage: pod addresses are left to the cluster's CNI", "cni-path", path)
		return nil
	}
	if err != nil {
		return fmt.Errorf("--cni-path: %w", err)
	}
	if len(cidrs) == 0 {
		return fmt.Errorf("--cni: the Node has no pod CIDR to write into %s (is the controller manager allocating node CIDRs?)", path)
	}
	out, changed, err := setCNIPodCIDRs(conf, cidrs)
	if err != nil {
		return fmt.Errorf("--cni-path %s: %w", path, err)
	}
	if !changed {
		return nil
	}
	tmp, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".*")
	if err != nil {
		return fmt.Errorf("--cni-path: %w", err)
	}
	defer os.Remove(tmp.Name())
	if _, err := tmp.Write(out); err == nil {
		err = tmp.Chmod(0o644)
	}
	if err == nil {
		err = tmp.Sync()
	}
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp.Name(), path)
	}
	if err != nil {
		return fmt.Errorf("write CNI configuration %s: %w", path, err)
	}
	log.Info("pod CIDRs written into the CNI configuration", "cni-path", path, "cidrs", cidrs)
	return nil
}
