//go:build !rdma

package soak

import (
	"testing"
	"time"

	"github.com/gdrconf/gdrconf/internal/config"
	model "github.com/gdrconf/gdrconf/internal/soak"
	"github.com/gdrconf/gdrconf/internal/verdict"
)

// startRails without the rdma tag: no traffic; the GPU side still soaks.
func startRails(*testing.T, config.Config, *model.Series) (*load, string) {
	return nil, "built without the rdma tag (go test -tags rdma): no verbs"
}

// RunFlap without the rdma tag: no rail to retrain.
func RunFlap(*testing.T, time.Duration) *Flap {
	return &Flap{Absent: verdict.Absentf("build with -tags rdma (make dist does)", "built without the rdma tag (go test -tags rdma): no verbs, no rail to retrain")}
}
