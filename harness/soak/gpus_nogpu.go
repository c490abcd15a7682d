//go:build !gpu

package soak

import (
	"testing"

	model "github.com/gdrconf/gdrconf/internal/soak"
)

// startGPUs without the gpu tag: no copy load; the rails still soak.
func startGPUs(*testing.T, *model.Series) (*load, string) {
	return nil, "built without the gpu tag (go test -tags gpu): no CUDA"
}
