//go:build !rdma

package soak

import (
	"testing"

	"github.com/gdrconf/gdrconf/internal/config"
	model "github.com/gdrconf/gdrconf/internal/soak"
)

// startRails without the rdma tag: no traffic; the GPU side still soaks.
func startRails(*testing.T, config.Config, *model.Series) (*load, string) {
	return nil, "built without the rdma tag (go test -tags rdma): no verbs"
}
