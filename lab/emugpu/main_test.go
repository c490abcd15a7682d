package emugpu_test

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"
)

// The emulated driver finds its GPUs through their device files, as the
// NVIDIA driver does (src/libcuda.c, "device files"). This machine has no
// /dev/nvidia*: every test here, and every process it starts, looks in a
// tree of its own (FAKE_CUDA_DEV_DIR) where each node is a regular file,
// which opens as a node a driver serves does. The tests of hidden devices
// plant trees of their own.
func TestMain(m *testing.M) {
	if os.Getenv("FAKE_CUDA_DEV_DIR") != "" { // a child of a test: its parent's tree
		os.Exit(m.Run())
	}
	dir, err := os.MkdirTemp("", "gdr-emugpu-dev-")
	if err == nil {
		err = plantDevices(dir, 8)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "emulated GPU device tree:", err)
		os.Exit(1)
	}
	os.Setenv("FAKE_CUDA_DEV_DIR", dir)
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

// plantDevices makes dir a device tree of the driver's control node and n
// GPU nodes, each a regular file anyone may open.
func plantDevices(dir string, n int) error {
	names := []string{"nvidiactl"}
	for i := 0; i < n; i++ {
		names = append(names, fmt.Sprintf("nvidia%d", i))
	}
	for _, name := range names {
		if err := os.WriteFile(filepath.Join(dir, name), nil, 0o666); err != nil {
			return err
		}
	}
	return nil
}
