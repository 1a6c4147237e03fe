package bench

import (
	"os/exec"
	"syscall"
)

// bindToParent makes the kernel kill a started server if the harness dies,
// so an interrupted benchmark leaves no server behind.
func bindToParent(cmd *exec.Cmd) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
}
