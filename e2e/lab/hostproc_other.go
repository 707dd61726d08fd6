//go:build !linux

package lab

import "errors"

// Start needs Linux; elsewhere it returns errors.ErrUnsupported.
func (l *Lab) Start(string, ...string) (*Process, error) { return nil, errors.ErrUnsupported }
