//go:build !linux

package bench

import "os/exec"

// bindToParent is a no-op where the kernel offers no parent-death signal.
func bindToParent(*exec.Cmd) {}
