package testminio

import "syscall"

// sysProcAttr kills MinIO if the test binary dies without stopping it.
func sysProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
}
