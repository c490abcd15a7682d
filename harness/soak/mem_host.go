//go:build rdma && !gpu

package soak

import "github.com/gdrconf/gdrconf/harness/rc"

// railAlloc without the gpu tag: the rails move host memory.
var railAlloc rc.Alloc = rc.HostBuffer
