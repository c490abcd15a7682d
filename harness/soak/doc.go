// Package soak runs the soak (conformance/soak): for GDR_SOAK every rail's
// RDMA WRITE traffic at the largest GDR_BW_SIZES (harness/traffic's engine,
// loopback or with the peer as GDR_ROLE says) and the GPUs' copy engines
// busy at the same time (harness/gpucopy), sampled every
// GDR_SOAK_INTERVAL into an internal/soak Series that is rewritten to the
// report folder after every sample, so a killed run leaves what it
// measured.
//
// The parts that need no device are here without build tags and are
// unit-tested: the Recorder turns one interval's readings (bytes moved,
// port state, counter snapshots, NVML, kernel log matches, mlxlink) into a
// Sample and Events, Loop paces the samples, stops on the deadline or a
// signal (Cutter) and writes the series, Progress is the line per
// interval. The load and the readers are in the tagged files.
package soak
