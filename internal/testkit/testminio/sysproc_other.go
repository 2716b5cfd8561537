//go:build !linux

package testminio

import "syscall"

func sysProcAttr() *syscall.SysProcAttr { return nil }
