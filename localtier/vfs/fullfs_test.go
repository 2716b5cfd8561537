package vfs

import (
	"errors"
	"io"
	"os"
	"syscall"
	"testing"
)

func TestDiskFull(t *testing.T) {
	mem := NewMem()
	d := NewDiskFull(mem, 10)
	f, err := d.Create("/a")
	if err != nil {
		t.Fatal(err)
	}
	if n, err := f.Write([]byte("0123456")); n != 7 || err != nil {
		t.Fatalf("first write: %d, %v", n, err)
	}
	n, err := f.Write([]byte("789abc"))
	var pe *os.PathError
	if n != 3 || !errors.Is(err, syscall.ENOSPC) || !errors.As(err, &pe) || pe.Path != "/a" {
		t.Fatalf("write past the budget: %d, %v", n, err)
	}
	if n, err := f.WriteAt([]byte("x"), 0); n != 0 || !errors.Is(err, syscall.ENOSPC) {
		t.Fatalf("WriteAt on a full disk: %d, %v", n, err)
	}
	if err := f.Truncate(1 << 20); err != nil {
		t.Fatalf("growing by truncate is free: %v", err)
	}
	if d.Written() != 10 || d.Refused() != 2 {
		t.Fatalf("written %d refused %d", d.Written(), d.Refused())
	}
	d.SetBudget(-1)
	if n, err := f.WriteAt([]byte("yz"), 0); n != 2 || err != nil {
		t.Fatalf("after freeing space: %d, %v", n, err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	r, err := mem.Open("/a")
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	buf := make([]byte, 10)
	if _, err := io.ReadFull(r, buf); err != nil || string(buf) != "yz23456789" {
		t.Fatalf("file holds %q, %v", buf, err)
	}
}
